module github.com/cantal-go/cantal

go 1.26.8
