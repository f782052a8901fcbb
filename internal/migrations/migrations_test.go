package migrations

import (
	"testing"
	"testing/fstest"
)

func TestLoad(t *testing.T) {
	ok := fstest.MapFS{
		"m/0002_more.sql": {Data: []byte("B")},
		"m/0001_init.sql": {Data: []byte("A")},
		"m/README":        {Data: []byte("ignored")},
	}
	ms, err := Load(ok, "m")
	if err != nil || len(ms) != 2 || ms[0].Name != "0001_init" || ms[1].SQL != "B" || ms[1].Version != 2 {
		t.Fatalf("Load = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":       {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"duplicate": {"m/0001_a.sql": {}, "m/0001_b.sql": {}},
		"zero":      {"m/0000_a.sql": {}},
		"no number": {"m/init.sql": {}},
		"short":     {"m/1_a.sql": {}},
	} {
		if _, err := Load(fsys, "m"); err == nil {
			t.Errorf("%s: Load accepted %v", name, fsys)
		}
	}
	if ms, err := Load(fstest.MapFS{}, "m"); err != nil || len(ms) != 0 {
		t.Fatalf("empty: %v, %v", ms, err)
	}
}
