package apiwire_test

import (
	"encoding/json"
	"fmt"

	"github.com/cantal-go/cantal/internal/apiwire"
)

// A metrics answer decodes with its NaN strings and exact counters, and encodes back to the
// bytes the agent wrote.
func ExampleMetricsAnswer() {
	body := []byte(`{"series":[{"labels":{"metric":"requests"},"kind":"counter","value":18446744073709551615,"ts":1700000000000,"rate":"NaN"},` +
		`{"labels":{"metric":"phase"},"kind":"state","value":"ready","ts":1700000000000,"text":"ready","since":1699999990000}]}`)
	var ans apiwire.MetricsAnswer
	if err := json.Unmarshal(body, &ans); err != nil {
		fmt.Println(err)
		return
	}
	c, s := ans.Series[0], ans.Series[1]
	fmt.Println(c.Value.Raw, c.Rate.F, s.Text, s.Since)
	out, _ := ans.MarshalJSON()
	fmt.Println(string(out) == string(body))
	// Output:
	// 18446744073709551615 NaN ready 1699999990000
	// true
}
