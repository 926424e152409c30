module github.com/cantal-go/cantal/bench

go 1.26.8

require github.com/cantal-go/cantal v0.0.0

replace github.com/cantal-go/cantal => ../
