package ecs

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
)

// The exported API of ECS's common/monitoring at its head, each function and method as a
// value of the type ECS declares it with: this file builds only while every one exists here
// with the same signature, so that code calling any of them builds with only its import path
// changed. NewMetric is the one exception, and is called instead: it takes ECS's two forms
// (name) and (name, timestamp), so its type is variadic.
var (
	_ func(context.Context, string, string) context.Context      = AddEnvAndRunType
	_ func(io.Writer, []Metric) error                            = Format
	_ func(uint16, string) error                                 = Run
	_ func(*Metric)                                              = Send
	_ func(*Metric)                                              = SendHistogrammable
	_ func(string, NameConvertType) grpc.StreamClientInterceptor = SetupStreamClientInterceptor
	_ func(string, NameConvertType) grpc.UnaryClientInterceptor  = SetupUnaryClientInterceptor
	_ func()                                                     = Stop
	_ func() bool                                                = IsRunning
	_ func(time.Duration) bool                                   = WaitUntilRunning
	_ func(*Metric, TimeResolution) func()                       = Timer
	_ func(*Metric, TimeResolution) func()                       = TimerSendSingle
	_ func(*Metric, TimeResolution) func()                       = TimerSendHist
	_ func(string, time.Time) Metric                             = NewDefaultMetric
	_ func() *MetricsAggregate                                   = NewMetricsAggregate
	_ func() *MetricsReservoirSampling                           = NewMetricsReservoirSampling
	_ func(*Metric, string, string)                              = (*Metric).AddTag
	_ func(*Metric, string, int64)                               = (*Metric).SetFieldInt64
	_ func(*Metric, string, uint64)                              = (*Metric).SetFieldUInt64
	_ func(*Metric, string, float64)                             = (*Metric).SetFieldFloat64
	_ func(*Metric, *Metric)                                     = (*Metric).MergeFields
	_ func(*Metric) FieldsType                                   = (*Metric).GetFields
	_ func(*Metric, error)                                       = (*Metric).AddError
	_ func(*Metric, string)                                      = (*Metric).AddResult
	_ func(*MetricsAggregate, *Metric)                           = (*MetricsAggregate).AddMetric
	_ func(*MetricsAggregate)                                    = (*MetricsAggregate).Clear
	_ func(*MetricsAggregate) []Metric                           = (*MetricsAggregate).GetMetrics
	_ func(*MetricsReservoirSampling, *Metric)                   = (*MetricsReservoirSampling).AddMetric
	_ func(*MetricsReservoirSampling)                            = (*MetricsReservoirSampling).Clear
	_ func(*MetricsReservoirSampling) []Metric                   = (*MetricsReservoirSampling).GetMetrics
	_ struct{}                                                   = EnvIDKey{}
	_ struct{}                                                   = RunTypeKey{}
	_ func(string) string                                        = NameConvertType(nil)
	_ []Tag                                                      = TagsType(nil)
	_ map[string]any                                             = FieldsType(nil)
	_ [4]string                                                  = [...]string{SUCCESS, ERROR, TIMEOUT, CANCELLED}
	_ [2]TimeResolution                                          = [...]TimeResolution{Millisecond, Nanosecond}
	_ func(string) Metric                                        = func(name string) Metric { return NewMetric(name) }
)

// AddError and AddResult tag the metric result=..., as ECS's.
func TestECS_AddErrorAndAddResultTags(t *testing.T) {
	for _, c := range []struct {
		add  func(*Metric)
		want string
	}{
		{func(m *Metric) { m.AddError(nil) }, "m,result=success x=1i 1000000000\n"},
		{func(m *Metric) { m.AddError(errors.New("boom")) }, "m,result=error x=1i 1000000000\n"},
		{func(m *Metric) { m.AddResult(TIMEOUT) }, "m,result=timeout x=1i 1000000000\n"},
	} {
		m := NewDefaultMetric("m", time.Unix(1, 0))
		m.SetFieldInt64("x", 1)
		c.add(&m)
		var b strings.Builder
		if err := Format(&b, []Metric{m}); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("Format = %q; want %q", b.String(), c.want)
		}
	}
}

// The unary interceptor sends one metric per call, named as asked, with method (converted),
// envId and runtype from the context, subsystem=ECS and execution_time_ms, as ECS's.
func TestECS_UnaryClientInterceptorSendsCallMetric(t *testing.T) {
	resetStore()
	icpt := SetupUnaryClientInterceptor("grpc_call", strings.ToUpper)
	ctx := AddEnvAndRunType(context.Background(), "2oDvieFrVTi", "PHYSICS")
	called := false
	invoker := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		called = true
		return nil
	}
	if err := icpt(ctx, "/o2control.Control/GetTasks", nil, nil, nil, invoker); err != nil || !called {
		t.Fatalf("interceptor = %v, invoker called %v", err, called)
	}
	sums, _ := stored(t)
	if len(sums) != 1 {
		t.Fatalf("stored %d metrics; want 1", len(sums))
	}
	m := sums[0]
	wantTags := TagsType{{"subsystem", "ECS"}, {"method", "/O2CONTROL.CONTROL/GETTASKS"}, {"envId", "2oDvieFrVTi"}, {"runtype", "PHYSICS"}}
	if m.name != "grpc_call" || len(m.tags) != len(wantTags) {
		t.Fatalf("metric %s %v; want grpc_call %v", m.name, m.tags, wantTags)
	}
	for i := range wantTags {
		if m.tags[i] != wantTags[i] {
			t.Errorf("tag %d = %v; want %v", i, m.tags[i], wantTags[i])
		}
	}
	if _, ok := m.GetFields()["execution_time_ms"].(int64); !ok {
		t.Errorf("fields %v; want execution_time_ms, an int64", m.GetFields())
	}
}
