package httpapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/gatewaytest"
)

// A store failure is not a missing exchange, and what failed is for the
// operator's log, not for whoever asked: the DSN of a database, a file
// path or a driver message never reach the client.
func TestInboxStoreFailuresAre503AndStayInTheLog(t *testing.T) {
	signer, _ := gatewaytest.Signer(t)
	a, xs, log := gatewaytest.State(t)
	g, err := gateway.New(gateway.Options{Agent: "agent:acme.gateway", Signer: signer, KID: "agent:acme.gateway#k",
		Keys: sig.NewStaticJWKS(jose.JSONWebKeySet{}), Authority: a, Exchanges: xs, Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	secret := errors.New("dial postgres://custos:hunter2@db.internal/custos: refused")
	h, err := NewInbox(InboxOptions{Gateway: g, Metadata: []byte(`{}`), JWKS: []byte(`{"keys":[]}`),
		Logger: slog.New(slog.NewTextHandler(&logged, nil)),
		Ready:  func(context.Context) error { return secret }})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		body, _ := io.ReadAll(rec.Body)
		return rec.Code, string(body)
	}
	for _, path := range []string{"/v1/arsia/exchanges/exc_nope", "/v1/arsia/exchanges/exc_nope/decision"} {
		if code, body := get(path); code != http.StatusNotFound {
			t.Errorf("%s with a working store: %d %s; want 404", path, code, body)
		}
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || strings.Contains(body, "hunter2") {
		t.Errorf("/readyz: %d %s; want 503 without the error's text", code, body)
	}
	if err := xs.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/arsia/exchanges/exc_nope", "/v1/arsia/exchanges/exc_nope/decision"} {
		code, body := get(path)
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s with a closed store: %d %s; want 503", path, code, body)
		}
		if strings.Contains(body, "closed") || strings.Contains(body, "sql") {
			t.Errorf("%s: the store's error reached the client: %s", path, body)
		}
	}
	for _, want := range []string{"hunter2", "reading an exchange", "exc_nope"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logged.String())
		}
	}
}
