package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/jcs"
)

// jcsFlags are the input limits shared by canon and digest.
type jcsFlags struct {
	maxDepth int
	maxSize  int
	pointer  string
}

func (f *jcsFlags) register(cmd *cobra.Command) {
	cmd.Flags().IntVar(&f.maxDepth, "max-depth", jcs.DefaultMaxDepth, "maximum nesting of arrays and objects")
	cmd.Flags().IntVar(&f.maxSize, "max-size", jcs.DefaultMaxSize, "maximum input size in bytes")
	cmd.Flags().StringVar(&f.pointer, "pointer", "", "use only the value at this RFC 6901 JSON Pointer (e.g. /request/action)")
}

func (f *jcsFlags) options() (*jcs.Options, error) {
	if f.maxDepth < 1 || f.maxSize < 1 {
		return nil, usageError{fmt.Errorf("--max-depth and --max-size must be positive")}
	}
	if f.pointer != "" && f.pointer[0] != '/' {
		return nil, usageError{fmt.Errorf("--pointer %q: a JSON Pointer must start with '/' (e.g. /request/action)", f.pointer)}
	}
	return &jcs.Options{MaxDepth: f.maxDepth, MaxSize: f.maxSize}, nil
}

// canonical reads the command's input and canonicalizes it.
func (f *jcsFlags) canonical(cmd *cobra.Command, args []string) ([]byte, error) {
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	data, name, err := readInput(cmd, args, f.maxSize)
	if err != nil {
		return nil, err
	}
	if f.pointer == "" {
		out, err := opts.Canonicalize(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return out, nil
	}
	// The whole document is decoded strictly first: a duplicate key outside
	// the selected value still makes the document untrustworthy.
	doc, err := opts.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	v, err := resolvePointer(doc, f.pointer)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out, err := opts.AppendValue(nil, v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

func newCanonCommand() *cobra.Command {
	var flags jcsFlags
	cmd := &cobra.Command{
		Use:   "canon [FILE|-]",
		Short: "Print the RFC 8785 canonical form of a JSON document",
		Long: `Print the RFC 8785 (JCS) canonical form of a JSON document read from FILE or
standard input. The output is exactly the canonical bytes, with no trailing
newline, so "custos canon f.json | sha256sum" hashes what "custos digest"
hashes.

Input must be I-JSON: duplicate member names, invalid UTF-8, lone
surrogates, NaN/Infinity and integers beyond ±(2^53-1) are rejected with the
JSON Pointer of the offending value.`,
		Args: argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := flags.canonical(cmd, args)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	flags.register(cmd)
	return cmd
}

func newDigestCommand() *cobra.Command {
	var flags jcsFlags
	cmd := &cobra.Command{
		Use:   "digest [FILE|-]",
		Short: `Print the "sha256:" digest of a JSON document's canonical form`,
		Long: `Print "sha256:" and the 64 lowercase hex digits of the SHA-256 of the
RFC 8785 canonical form of a JSON document read from FILE or standard input.
This is the AAIS action_digest when the document is the action object.`,
		Args: argsUpTo(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := flags.canonical(cmd, args)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), jcs.DigestCanonical(out))
			return err
		},
	}
	flags.register(cmd)
	return cmd
}

// resolvePointer returns the value at an RFC 6901 JSON Pointer in a document
// decoded by jcs.Decode.
func resolvePointer(doc any, pointer string) (any, error) {
	if pointer == "" {
		return doc, nil
	}
	if pointer[0] != '/' {
		return nil, usageError{fmt.Errorf("JSON Pointer %q must start with '/'", pointer)}
	}
	cur := doc
	at := ""
	for _, tok := range strings.Split(pointer[1:], "/") {
		name := strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		at += "/" + tok
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[name]
			if !ok {
				return nil, fmt.Errorf("JSON Pointer %q: no member %q", at, name)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || !isArrayIndex(tok) || i >= len(node) {
				return nil, fmt.Errorf("JSON Pointer %q: no element %q in an array of %d", at, tok, len(node))
			}
			cur = node[i]
		default:
			return nil, fmt.Errorf("JSON Pointer %q: %q is not inside an object or array", at, tok)
		}
	}
	return cur, nil
}

// isArrayIndex applies RFC 6901's array-index grammar: "0" or digits without
// a leading zero (strconv.Atoi alone would also take "+1" and "01").
func isArrayIndex(tok string) bool {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return false
		}
	}
	return true
}
