package jcs_test

import (
	"os"
	"path/filepath"
	"testing"
)

// handCorpus holds small valid documents covering every construct.
var handCorpus = []string{
	`null`, `true`, `false`, `0`, `-0`, `""`, `[]`, `{}`, `[[]]`, `{"":{}}`,
	`{"a":[],"b":false,"c":null,"d":{}}`,
	`[1,"two",3.0,{"four":4},[5],null,true,false]`,
	`{"b":2,"a":1,"c":{"z":[3,2,1],"y":"\u00e9"}}`,
	`"\u0000\u001f\u007f\u2028\u2029\ud83d\ude00\/\"\\\b\f\n\r\t"`,
	"{\"\U0001F600\":1,\"\uFB33\":2,\"\uE000\":3,\"\uD7FF\":4}",
	`{"a":1,"\u0062":2}`,
	` [ 1 , 2 ] `,
	"\t\r\n{\"k\"\n:\r\"v\"\t}\n",
	`[9007199254740991,-9007199254740991,1e21,1e-7,5e-324,1.7976931348623157e308]`,
	`{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001]}`,
}

// validCorpus collects valid documents from the tests' tables, the golden
// and known-answer files and generated documents.
func validCorpus(t testing.TB) [][]byte {
	t.Helper()
	var docs [][]byte
	add := func(s string) { docs = append(docs, []byte(s)) }
	for _, s := range handCorpus {
		add(s)
	}
	add(rfcSampleInput)
	for _, row := range numberTable {
		add(row.in)
		add(`{"n":[` + row.in + `]}`)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, filepath.Join("testdata", "aais-shell-action.json"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	g, vs := generatedDocs(99, 150)
	for _, v := range vs {
		add(g.text(v))
	}
	return docs
}
