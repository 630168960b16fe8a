module github.com/roformer-go/roformer

go 1.26
