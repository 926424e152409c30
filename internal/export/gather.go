package export

import (
	"bytes"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// appendGathered appends the families Options.Gather returns (the agent's own process_*
// self-metrics, from client_golang's process collector), written by prometheus/common's
// encoders in format f, after the series' families. A family whose name a series' family has
// taken already is left out: an exposition never has a family twice.
func (e *Prom) appendGathered(dst []byte, f Format) []byte {
	if e.Gather == nil {
		return dst
	}
	var b bytes.Buffer
	for _, mf := range e.Gather() {
		if _, taken := e.famIdx[mf.GetName()]; taken {
			continue
		}
		if _, taken := e.famOM[mf.GetName()]; taken {
			continue
		}
		if mf.GetType() == dto.MetricType_COUNTER {
			if _, taken := e.famOM[trimTotal(mf.GetName())]; taken {
				continue
			}
		}
		b.Reset()
		var err error
		if f == FormatOpenMetrics {
			_, err = expfmt.MetricFamilyToOpenMetrics(&b, mf)
		} else {
			_, err = expfmt.MetricFamilyToText(&b, mf)
		}
		if err == nil {
			dst = append(dst, b.Bytes()...)
		}
	}
	return dst
}

func trimTotal(s string) string {
	if len(s) > 6 && s[len(s)-6:] == "_total" {
		return s[:len(s)-6]
	}
	return s
}
