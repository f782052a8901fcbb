package audit_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/custos-runtime/custos/audit"
)

func Example() {
	ctx := context.Background()
	clock := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	log := audit.New(audit.NewMemory(), &audit.Options{
		Now:       func() time.Time { return clock },
		Retention: audit.ProfileRetention(nil, 30*24*time.Hour),
	})
	defer log.Close()

	payloadHash, _ := audit.PayloadHash([]byte(`{"type":"transfer","amount":"12.50"}`))
	rec, err := log.Append(ctx, audit.Record{
		Kind:        audit.KindReceived,
		MessageID:   "msg-1",
		Sender:      "did:web:a.example",
		Recipient:   "did:web:b.example",
		Capability:  "payments.transfer",
		PayloadHash: payloadHash,
		Profile:     "GDPR-STANDARD",
		Oversight:   "not_required",
		Outcome:     audit.OutcomeAccepted,
	})
	if err != nil {
		// Fail closed: the request must not go ahead.
		fmt.Println("refuse the request:", err)
		return
	}
	fmt.Println(rec.Seq, rec.Prev == audit.Genesis, rec.RetainUntil.Format(time.DateOnly))

	// 31 days later the record is past its retention: Purge redacts it.
	n, _ := log.Purge(ctx, clock.AddDate(0, 0, 31))
	fmt.Println("redacted", n)

	rep, _ := log.Verify(ctx)
	fmt.Println("records", rep.Records, "redacted", rep.Redacted, "ok", rep.OK())

	_, _ = log.Export(ctx, os.Stdout, 1, 1)
	// Output:
	// 1 true 2026-12-30
	// redacted 1
	// records 2 redacted 1 ok true
	// {"hash":"sha256:454405b4dd8ceb02bfda7d1b97dbfa939645a94c16fee0e3bb5dd93195f2c26a","kind":"received","prev":"sha256:0000000000000000000000000000000000000000000000000000000000000000","redacted":true,"retain_until":"2026-12-30T10:00:00.000000000Z","seq":1,"time":"2026-11-30T10:00:00.000000000Z"}
}
