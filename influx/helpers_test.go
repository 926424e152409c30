package influx

import (
	"errors"
	"fmt"
	"time"

	"github.com/influxdata/line-protocol/v2/lineprotocol"
)

// parseLines decodes line protocol into Metrics with the reference decoder.
func parseLines(data []byte) ([]Metric, error) {
	var ms []Metric
	dec := lineprotocol.NewDecoderWithBytes(data)
	for dec.Next() {
		name, err := dec.Measurement()
		if err != nil {
			return nil, err
		}
		m := NewMetric(string(name), time.Time{})
		for {
			k, v, err := dec.NextTag()
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
			m.AddTag(string(k), string(v))
		}
		for {
			k, v, err := dec.NextField()
			if err != nil {
				return nil, err
			}
			if k == nil {
				break
			}
			switch v.Kind() {
			case lineprotocol.Int:
				m.SetFieldInt64(string(k), v.IntV())
			case lineprotocol.Uint:
				m.SetFieldUInt64(string(k), v.UintV())
			case lineprotocol.Float:
				m.SetFieldFloat64(string(k), v.FloatV())
			default:
				return nil, fmt.Errorf("field %s: unsupported kind %v", k, v.Kind())
			}
		}
		ts, err := dec.Time(lineprotocol.Nanosecond, time.Time{})
		if err != nil {
			return nil, err
		}
		m.SetTimestamp(ts)
		ms = append(ms, m)
	}
	if err := dec.Err(); err != nil {
		return nil, err
	}
	if len(ms) == 0 && len(data) > 0 {
		return nil, errors.New("no lines")
	}
	return ms, nil
}

func mustNew(t interface{ Fatal(...any) }, cfg Config) *Monitor {
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
