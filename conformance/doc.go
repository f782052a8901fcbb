// Package conformance runs Custos' protocol packages against upstream test
// corpora and reports, file by file, what passed, failed or was skipped.
//
// ASC runs the ASC 0.1 corpus: the JSON blocks extracted from the upstream
// documentation (complete envelopes and fragments of envelopes and
// bindings). Upstream ASC publishes no test vectors, so this corpus is all
// examples and contains no negative cases; package asc carries its own
// invalid vectors in asc/testdata/invalid.
package conformance
