package client

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func readAll(t testing.TB, in string) ([]sseEvent, error) {
	r := newSSEReader(strings.NewReader(in), nil)
	var out []sseEvent
	for {
		ev, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"one event", "id: 3\nevent: approval.requested\ndata: {}\n\n", []sseEvent{{id: "3", event: "approval.requested", data: "{}"}}},
		{"CRLF", "id: 1\r\ndata: a\r\n\r\n", []sseEvent{{id: "1", data: "a"}}},
		{"lone CR", "data: a\rdata: b\r\r", []sseEvent{{data: "a\nb"}}},
		{"data lines joined", "data: a\ndata:b\ndata:  c\n\n", []sseEvent{{data: "a\nb\n c"}}},
		{"comments and keepalives", ": keepalive\n\n: x\ndata: y\n\n", []sseEvent{{data: "y"}}},
		{"no data: not dispatched", "event: gap\n\nid: 2\n\n", nil},
		{"empty data is data", "event: gap\ndata\n\n", []sseEvent{{event: "gap"}}},
		{"cut off by the end", "data: a\n\ndata: b\n", []sseEvent{{data: "a"}}},
		{"unknown fields ignored", "retry: 100\nfoo: bar\ndata: z\n\n", []sseEvent{{data: "z"}}},
		{"id with NUL ignored", "id: 1\x002\ndata: z\n\n", []sseEvent{{data: "z"}}},
		{"fields reset between events", "event: a\ndata: 1\n\ndata: 2\n\n", []sseEvent{{event: "a", data: "1"}, {data: "2"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(t, tc.in)
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// A line longer than any message is an error, not an unbounded buffer.
func TestSSEReaderLongLine(t *testing.T) {
	_, err := readAll(t, "data: "+strings.Repeat("x", maxSSELine+1)+"\n\n")
	if err == nil {
		t.Fatal("no error for an oversized line")
	}
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"id: 3\nevent: approval.requested\ndata: {}\n\n", "data: a\r\ndata: b\r\r", ": k\n\n",
		"event: gap\ndata: {\"store_id\":\"s\",\"latest\":3}\n\n", "data", "\r\n\r", "id: \x00\ndata:\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		evs, _ := readAll(t, in)
		for _, ev := range evs {
			// Lines never survive into a field: data is joined with LF only.
			if strings.ContainsRune(ev.event, '\n') || strings.ContainsRune(ev.id, '\n') || strings.ContainsRune(ev.data, '\r') {
				t.Fatalf("a line break inside a field: %+v", ev)
			}
		}
		if len(evs) > strings.Count(in, "\n")+strings.Count(in, "\r") {
			t.Fatalf("%d events from %d line ends", len(evs), strings.Count(in, "\n"))
		}
	})
}
