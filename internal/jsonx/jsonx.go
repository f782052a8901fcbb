// Package jsonx is encoding/json the way Custos writes JSON for people and
// peers: "<", ">" and "&" stay as they are (encoding/json would write
// \u003c, \u003e and \u0026, which a reviewer reads as noise and some
// strict peers compare byte for byte), and no trailing newline.
//
// Digests and signatures never depend on this: they are computed over the
// RFC 8785 canonical form (package jcs).
package jsonx

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// AppendString appends s to dst as a JSON string without HTML escaping.
// Invalid UTF-8 is written as \ufffd, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	b, _ := Marshal(s) // a string always encodes
	return append(dst, b...)
}
