// Package remotewrite sends the agent's held history to Prometheus remote-write receivers
// (Prometheus, VictoriaMetrics, Mimir, Thanos): protocol 1.0, protobuf and snappy, every sample
// with the time of its own scan.
//
// # Model
//
// It keeps no buffer of its own. An Endpoint reads the history the agent already holds
// (Source, which *history.Store satisfies, through histread, the reader carbon uses too) from
// its position, the time of the last scan the
// receiver acknowledged, which it keeps in a small file (Options.Position: the state
// directory's one position format, statedir.PositionFile) replaced atomically and durably after
// every acknowledged scan. So a receiver that was down, or an agent
// that restarted, resumes where the receiver left off and gets what it missed, oldest first, as
// far back as the history reaches.
//
// It sends scan by scan: all of one scan's samples (split into requests of at most
// Queue.MaxBatchBytes of protobuf) before any sample of the next. So every series arrives in
// ascending time, as Prometheus' default in-order ingestion wants, and sending a scan again
// (after a crash between an acknowledgement and the position's write) never makes a receiver
// refuse what it had not stored yet: a repeated sample is either one the receiver already has
// at that time with that value (accepted) or older than its newest (refused, and already there).
//
// # Late points
//
// A pushed point (/write, statsd, OTLP) is stored at the scan its own time falls in, which may
// be a scan already sent (history.Store.AddAt, anywhere after Source.BackfillFrom). Sending it
// then would put it behind newer samples of its series at the receiver, and Prometheus refuses
// an out-of-order sample (with the whole request, in 2.x). So the series Options.Late names
// are held back: a second pass, with its own position (Status.LatePositionMs, statedir.Position.LateMs),
// sends them scan by scan only up to BackfillFrom, the last scan that can no longer change.
// Every point the agent acknowledged reaches the receiver once and in order, at the cost of a
// delay for pushed series of up to one history segment and its grace scans. Scanned series
// never get late points and are sent as their scans are committed.
//
// Errors: a network error, a 5xx or a 429 is retried with exponential backoff and full jitter
// (429's Retry-After honoured up to MaxBackoff) until the receiver takes the request; the
// position does not move meanwhile, so an outage costs no memory beyond the request at hand.
// Any other 4xx means the receiver will never take this request: it is counted, its samples
// are counted as dropped, the reason is logged (within a log budget) and sending goes on.
//
// # Concurrency
//
// An Endpoint's Run is its only sender goroutine; Notify and Status may be called from any
// goroutine at any time. The Source must be safe for concurrent reading (history.Store is).
package remotewrite
