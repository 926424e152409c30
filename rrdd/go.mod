module github.com/cantal-go/cantal/rrdd

go 1.26.8

require github.com/cantal-go/cantal/internal/jsonstr v0.0.0

replace github.com/cantal-go/cantal/internal/jsonstr => ../internal/jsonstr
