// Package migrations reads the versioned SQL migrations a store embeds:
// files named NNNN_description.sql, versions 1, 2, 3... without gaps. Each
// store applies them in its own database's way; this package only lists
// them, so every store agrees on the naming and ordering rules.
package migrations

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one migration file.
type Migration struct {
	// Version is NNNN, starting at 1.
	Version int
	// Name is the file name without ".sql" ("0001_init").
	Name string
	// SQL is the file's text.
	SQL string
}

// Load returns the migrations in dir of fsys in version order. A file
// not named NNNN_description.sql, a version below 1, a duplicate or a gap
// is an error: a build must never skip or reorder a schema change.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, n := range names {
		base := path.Base(n)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v < 1 || len(num) != 4 {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_description.sql", base)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: strings.TrimSuffix(base, ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: version %d, want %d", m.Name, m.Version, i+1)
		}
	}
	return out, nil
}
