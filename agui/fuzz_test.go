package agui_test

import (
	"testing"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/agui"
)

// FuzzParseResume: any input gives a message or an error wrapping
// ErrMalformed, never a panic; a message is always an approval.decided for
// the request the resume names.
func FuzzParseResume(f *testing.F) {
	_, ev := pending(f)
	env := decided(f, ev.Request, aais.Approve, alice)
	f.Add(resumeBody(ev.Request.ID, env))
	f.Add([]byte(`{"interruptId":"` + ev.Request.ID + `","metadata":{"aais":` + string(env) + `}}`))
	f.Add([]byte(`{"resume":{"interruptId":"x","metadata":{"aais":{}}}}`))
	f.Add([]byte(`{"resume":null}`))
	f.Add([]byte(`{"interruptId":1}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := agui.ParseResume(body)
		if err != nil {
			if m != nil {
				t.Fatal("a message with an error")
			}
			return
		}
		if m.Type != aais.TypeDecided || m.Decision == nil || m.Decision.RequestID == "" {
			t.Fatalf("accepted %+v", m)
		}
	})
}
