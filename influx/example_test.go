package influx_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/cantal-go/cantal/influx"
)

func ExampleMetric() {
	m := influx.NewMetric("kafka", time.Unix(0, 1746457955000000000))
	m.AddTag("topic", "aliecs.run")
	m.AddTag("subsystem", "ECS") // tags are kept sorted
	m.SetFieldUInt64("send_bytes", 1638400)
	m.SetFieldUInt64("sent_messages", 42)
	fmt.Println(m.String())
	// Output: kafka,subsystem=ECS,topic=aliecs.run send_bytes=1638400u,sent_messages=42u 1746457955000000000
}

func ExampleMonitor() {
	mon, err := influx.New(influx.Config{})
	if err != nil {
		panic(err)
	}
	// Sends within the same second, measurement and tags are summed.
	m := influx.NewMetric("requests", time.Unix(1700000000, 0))
	m.AddTag("handler", "/api")
	for i := range 3 {
		m.SetTimestamp(time.Unix(1700000000, int64(i)*1000))
		m.SetFieldInt64("count", 1)
		m.SetFieldFloat64("bytes", 512)
		if err := mon.Send(&m); err != nil {
			fmt.Println(err)
		}
	}
	// Histogrammables report statistics per field.
	d := influx.NewMetric("latency", time.Unix(1700000000, 0))
	for _, ms := range []float64{10, 20, 30, 40, 50} {
		d.SetFieldFloat64("ms", ms)
		if err := mon.SendHistogrammable(&d); err != nil {
			fmt.Println(err)
		}
	}
	fmt.Print(string(mon.AppendLines(nil)))
	// Output:
	// requests,handler=/api count=3i,bytes=1536 1700000000000000000
	// latency ms_mean=30,ms_median=30,ms_min=10,ms_p10=14,ms_p30=22,ms_p70=38,ms_p90=46,ms_max=50,ms_count=5,ms_poolsize=5 1700000000000000000
}

func ExampleMonitor_Run() {
	// A stand-in for the cantal-agent's POST /write.
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("agent got: %s", body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer agent.Close()

	mon, err := influx.New(influx.Config{
		Endpoint: "127.0.0.1:0/ecsmetrics", // serve on any free port
		PushURL:  agent.URL + "/write",
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- mon.Run(ctx) }()

	m := influx.NewMetric("jobs", time.Unix(1700000000, 0))
	m.SetFieldUInt64("done", 1)
	if err := mon.Send(&m); err != nil {
		fmt.Println(err)
	}
	cancel() // Run makes a last push before returning
	if err := <-done; err != nil {
		fmt.Println(err)
	}
	// Output: agent got: jobs done=1u 1700000000000000000
}
