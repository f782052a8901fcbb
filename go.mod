module github.com/custos-runtime/custos

go 1.26
