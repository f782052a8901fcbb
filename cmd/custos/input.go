package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// readInput reads the file named by the optional argument, or standard input
// when it is absent or "-", refusing more than limit bytes.
func readInput(cmd *cobra.Command, args []string, limit int) (data []byte, name string, err error) {
	var r io.Reader = cmd.InOrStdin()
	name = "standard input"
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, args[0], err
		}
		defer f.Close()
		r, name = f, args[0]
	}
	data, err = io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, name, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > limit {
		return nil, name, fmt.Errorf("%s: larger than %d bytes (raise --max-size)", name, limit)
	}
	return data, name, nil
}
