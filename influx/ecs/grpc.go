package ecs

import (
	"context"

	"google.golang.org/grpc"
)

// This file holds ECS's gRPC client interceptors, which time each call into a metric. They
// are here, in package ecs, because code written against ECS calls them through the same
// import as the rest; package ecs therefore imports google.golang.org/grpc (which every ECS
// program already does). Package influx does not, and neither does the agent.

// EnvIDKey and RunTypeKey are the context keys AddEnvAndRunType sets; the interceptors read
// them into the tags envId and runtype.
type (
	EnvIDKey   struct{}
	RunTypeKey struct{}
)

// AddEnvAndRunType returns ctx carrying an environment id and a run type, which the
// interceptors add to their metrics as the tags envId and runtype, as ECS's.
func AddEnvAndRunType(ctx context.Context, envId, runType string) context.Context {
	ctx = context.WithValue(ctx, EnvIDKey{}, envId)
	return context.WithValue(ctx, RunTypeKey{}, runType)
}

// NameConvertType turns a gRPC method name ("/pkg.Service/Method") into the value of the
// metric's method tag.
type NameConvertType func(string) string

// SetupUnaryClientInterceptor returns a unary client interceptor that sends, per call, a
// metric named name (NewMetric(name): now, subsystem=ECS) with the tags method=convert(method)
// and, when the call's context has them, envId and runtype, and the field execution_time_ms:
// the call's duration, summed per second by Send (TimerSendSingle), as ECS's.
func SetupUnaryClientInterceptor(name string, convert NameConvertType) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		metric := callMetric(ctx, name, convert(method))
		defer TimerSendSingle(&metric, Millisecond)()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// SetupStreamClientInterceptor returns a stream client interceptor whose streams send, per
// RecvMsg, a metric as SetupUnaryClientInterceptor's for that receive, as ECS's.
func SetupStreamClientInterceptor(metricName string, convert NameConvertType) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		cs, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &measuredClientStream{ClientStream: cs, ctx: ctx, method: convert(method), name: metricName}, nil
	}
}

type measuredClientStream struct {
	grpc.ClientStream
	ctx    context.Context
	method string
	name   string
}

func (s *measuredClientStream) RecvMsg(m any) error {
	metric := callMetric(s.ctx, s.name, s.method)
	defer TimerSendSingle(&metric, Millisecond)()
	return s.ClientStream.RecvMsg(m)
}

func callMetric(ctx context.Context, name, method string) Metric {
	metric := NewMetric(name)
	metric.AddTag("method", method)
	if env, ok := ctx.Value(EnvIDKey{}).(string); ok {
		metric.AddTag("envId", env)
	}
	if rt, ok := ctx.Value(RunTypeKey{}).(string); ok {
		metric.AddTag("runtype", rt)
	}
	return metric
}
