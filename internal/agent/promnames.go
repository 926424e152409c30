package agent

import (
	"github.com/cantal-go/cantal/internal/promname"
	"github.com/cantal-go/cantal/internal/textfile"
)

// promOptions are the options of the promname.Mappers of /metrics and remote write: the types
// of the textfile collector's families, as their files declare them.
func (a *Agent) promOptions() promname.Options {
	var o promname.Options
	if tf := a.textfile; tf != nil {
		o.TextfileType = func(name string) (promname.Type, bool) {
			t, ok := tf.Type(name)
			switch {
			case !ok:
				return 0, false
			case t == textfile.Counter:
				return promname.Counter, true
			case t == textfile.Gauge:
				return promname.Gauge, true
			}
			return promname.Untyped, true
		}
	}
	return o
}
