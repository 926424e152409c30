module github.com/cantal-go/cantal/influx

go 1.26.8

require (
	github.com/influxdata/line-protocol/v2 v2.2.1
	google.golang.org/grpc v1.84.0
)

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261012220534-4341edf3f941 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
