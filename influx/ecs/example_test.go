package ecs_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	monitoring "github.com/cantal-go/cantal/influx/ecs"
)

// The ECS design document's example, scraped once.
func Example() {
	go monitoring.Run(0, "/ecsmetrics") // ECS: go monitoring.Run(8088, "/ecsmetrics")
	defer monitoring.Stop()
	monitoring.WaitUntilRunning(5 * time.Second)

	m := monitoring.NewMetric("measurement", time.Unix(1746457955, 123))
	m.AddTag("tag1", "val1")
	m.SetFieldUInt64("field1", 42)
	monitoring.Send(&m)
	monitoring.SendHistogrammable(&m)

	_, port, _ := net.SplitHostPort(monitoring.Addr())
	resp, err := http.Get("http://127.0.0.1:" + port + "/ecsmetrics")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))
	// Output:
	// measurement,tag1=val1 field1=42u 1746457955000000000
	// measurement,tag1=val1 field1_mean=42,field1_median=42,field1_min=42,field1_p10=42,field1_p30=42,field1_p70=42,field1_p90=42,field1_max=42,field1_count=1u,field1_poolsize=1u 1746457955000000000
}

func ExampleTimerSendHist() {
	work := func() {
		m := monitoring.NewMetric("batch") // now, tagged subsystem=ECS
		defer monitoring.TimerSendHist(&m, monitoring.Millisecond)()
		// ... the work measured ...
	}
	work()
}
