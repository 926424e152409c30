package agent

// otlpRoutes mounts the OTLP/HTTP metrics ingest, POST /v1/metrics (see ingest.Push.OTLPHandler
// for the mapping and the answers). Like /write, it changes state: the access Guard asks the
// Write role of it (needRole: every method but GET, HEAD and OPTIONS), and its body passes
// through the same body budget (readBodies) before the handler's own limit of
// ingest.Config.MaxBodyBytes, compressed and decompressed; its decompressed body and its decoded
// form are taken from that budget too while the request holds them (ingest.Config.Bodies).
func (a *Agent) otlpRoutes() {
	a.mux.Handle("POST /v1/metrics", a.push.OTLPHandler())
}
