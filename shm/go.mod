module github.com/cantal-go/cantal/shm

go 1.26.8

require (
	github.com/cantal-go/cantal/internal/jsonstr v0.0.0
	golang.org/x/sys v0.49.0
)

replace github.com/cantal-go/cantal/internal/jsonstr => ../internal/jsonstr
