package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// finding is one problem a validate command reports, whatever the protocol.
type finding struct {
	Pointer  string `json:"pointer"`
	Code     string `json:"code"`
	Severity string `json:"severity"` // "error" or "warning"
	Message  string `json:"message"`
	Keyword  string `json:"keyword,omitempty"` // the JSON Schema keyword, for structural errors
	text     string // the protocol's own one-line rendering
}

// reportFindings prints findings as text lines or as one JSON document, and
// returns an error naming the input when any finding is an error. what
// names the kind of document ("ASC envelope").
func reportFindings(w io.Writer, name, what string, findings []finding, asJSON bool) error {
	errs := 0
	for _, f := range findings {
		if f.Severity == "error" {
			errs++
		}
	}
	if asJSON {
		out := struct {
			Valid  bool      `json:"valid"`
			Issues []finding `json:"issues"`
		}{Valid: errs == 0, Issues: append([]finding{}, findings...)}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false) // "<root>" reads better than "\u003croot\u003e"
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		for _, f := range findings {
			fmt.Fprintln(w, f.text)
		}
	}
	if errs > 0 {
		return fmt.Errorf("%s: not a valid %s (%d error(s), %d warning(s))", name, what, errs, len(findings)-errs)
	}
	if !asJSON {
		fmt.Fprintf(w, "%s: valid %s (%d warning(s))\n", name, what, len(findings))
	}
	return nil
}
