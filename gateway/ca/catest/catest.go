// Package catest holds every ca.Registry implementation to one behaviour:
// Run is the contract test the SQLite and PostgreSQL registries pass.
package catest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/custos-runtime/custos/gateway/ca"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func cert(serial, agent string, i int) ca.Certificate {
	nb := t0.Add(time.Duration(i) * time.Minute)
	return ca.Certificate{Issued: ca.Issued{Serial: serial, AgentID: agent, NotBefore: nb, NotAfter: nb.Add(24 * time.Hour),
		ChainPEM: []byte("-----BEGIN CERTIFICATE-----\n" + serial + "\n-----END CERTIFICATE-----\n")}, IssuedBy: "admin"}
}

// Run checks the registry newRegistry returns (a fresh, empty one each
// call).
func Run(t *testing.T, newRegistry func(t *testing.T) ca.Registry) {
	ctx := context.Background()
	t.Run("RecordGet", func(t *testing.T) {
		r := newRegistry(t)
		c := cert("1a", "agent:acme.bot", 0)
		if err := r.Record(ctx, c); err != nil {
			t.Fatal(err)
		}
		got, err := r.Get(ctx, "1a")
		if err != nil {
			t.Fatal(err)
		}
		if got.Serial != "1a" || got.AgentID != c.AgentID || !got.NotBefore.Equal(c.NotBefore) || !got.NotAfter.Equal(c.NotAfter) ||
			string(got.ChainPEM) != string(c.ChainPEM) || got.IssuedBy != "admin" || got.Revoked() {
			t.Fatalf("Get = %+v, want %+v", got, c)
		}
		if err := r.Record(ctx, c); err == nil {
			t.Fatal("a serial recorded twice")
		}
		if _, err := r.Get(ctx, "1b"); !errors.Is(err, ca.ErrNotFound) {
			t.Fatalf("Get(unknown) = %v, want ErrNotFound", err)
		}
	})
	t.Run("Revoke", func(t *testing.T) {
		r := newRegistry(t)
		if err := r.Record(ctx, cert("2a", "agent:acme.bot", 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Revoke(ctx, "2b", t0, "admin", "x"); !errors.Is(err, ca.ErrNotFound) {
			t.Fatalf("Revoke(unknown) = %v, want ErrNotFound", err)
		}
		at := t0.Add(time.Hour)
		got, err := r.Revoke(ctx, "2a", at, "admin", "key compromise")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Revoked() || !got.RevokedAt.Equal(at) || got.RevokedBy != "admin" || got.RevocationReason != "key compromise" {
			t.Fatalf("Revoke = %+v", got)
		}
		// A second revocation keeps the first's time, actor and reason.
		again, err := r.Revoke(ctx, "2a", at.Add(time.Hour), "ops", "other")
		if err != nil || !again.RevokedAt.Equal(at) || again.RevokedBy != "admin" || again.RevocationReason != "key compromise" {
			t.Fatalf("second Revoke = %+v, %v", again, err)
		}
		if g, err := r.Get(ctx, "2a"); err != nil || !g.Revoked() || !g.RevokedAt.Equal(at) {
			t.Fatalf("Get after Revoke = %+v, %v", g, err)
		}
	})
	t.Run("ConcurrentRevoke", func(t *testing.T) {
		r := newRegistry(t)
		if err := r.Record(ctx, cert("3a", "agent:acme.bot", 0)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		results := make([]ca.Certificate, 8)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := r.Revoke(ctx, "3a", t0.Add(time.Duration(i+1)*time.Minute), fmt.Sprint("op", i), "r")
				if err != nil {
					t.Error(err)
				}
				results[i] = c
			}()
		}
		wg.Wait()
		for _, c := range results {
			if !c.RevokedAt.Equal(results[0].RevokedAt) || c.RevokedBy != results[0].RevokedBy {
				t.Fatalf("racing revocations disagree: %+v vs %+v", c, results[0])
			}
		}
	})
	t.Run("List", func(t *testing.T) {
		r := newRegistry(t)
		for i, s := range []string{"a1", "a2", "a3", "a4", "a5"} {
			agent := "agent:acme.bot"
			if i%2 == 1 {
				agent = "agent:acme.other"
			}
			if err := r.Record(ctx, cert(s, agent, i)); err != nil {
				t.Fatal(err)
			}
		}
		serials := func(cs []ca.Certificate) (out []string) {
			for _, c := range cs {
				out = append(out, c.Serial)
			}
			return out
		}
		all, err := r.List(ctx, "", "", 10)
		if err != nil || fmt.Sprint(serials(all)) != "[a5 a4 a3 a2 a1]" {
			t.Fatalf("List all = %v, %v", serials(all), err)
		}
		page, err := r.List(ctx, "", "a4", 2)
		if err != nil || fmt.Sprint(serials(page)) != "[a3 a2]" {
			t.Fatalf("List before a4 = %v, %v", serials(page), err)
		}
		bot, err := r.List(ctx, "agent:acme.bot", "", 10)
		if err != nil || fmt.Sprint(serials(bot)) != "[a5 a3 a1]" {
			t.Fatalf("List agent = %v, %v", serials(bot), err)
		}
		if _, err := r.List(ctx, "", "ffff", 2); !errors.Is(err, ca.ErrNotFound) {
			t.Fatalf("List before unknown = %v, want ErrNotFound", err)
		}
	})
}
