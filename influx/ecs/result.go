package ecs

// The values of the "result" tag AddResult and AddError add, as ECS names them. SUCCESS, ERROR
// and TIMEOUT are ECS's (its metric.go at the head, OCTRL-1092); the fourth, CANCELLED, could
// not be checked against ECS's source when this was written (see the package documentation).
const (
	SUCCESS   = "success"
	ERROR     = "error"
	TIMEOUT   = "timeout"
	CANCELLED = "cancelled"
)

// AddResult adds the tag result=<result> to metric, as ECS's: usually one of SUCCESS, ERROR,
// TIMEOUT or CANCELLED. Like every tag it is kept in order, so a metric that gets two results
// has the tag twice.
func (metric *Metric) AddResult(result string) {
	metric.AddTag("result", result)
}

// AddError adds result=success when err is nil and result=error otherwise, as ECS's.
func (metric *Metric) AddError(err error) {
	if err == nil {
		metric.AddResult(SUCCESS)
	} else {
		metric.AddResult(ERROR)
	}
}
