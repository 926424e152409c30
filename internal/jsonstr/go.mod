module github.com/cantal-go/cantal/internal/jsonstr

go 1.26.8
