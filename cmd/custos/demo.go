package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/aais"
	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/gateway"
	"github.com/custos-runtime/custos/gateway/config"
	"github.com/custos-runtime/custos/store"
)

const (
	demoAgent   = "agent:demo.assistant"
	demoGateway = "agent:demo.gateway"
)

func newDemoCommand() *cobra.Command {
	var dataDir, listen string
	var approve, keep bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "See the whole lifecycle in a minute: a gateway, an agent, a low-risk and a high-risk request",
		Long: `Start a gateway in this process and act as an AI agent calling it:

  1. a low-risk request (profile GDPR-STANDARD) runs at once and its signed
     response is verified;
  2. a high-risk request (profile EU-AI-ACT-HIGH-RISK) waits for a human: the
     demo tells you how to approve or deny it (the web inbox, another
     terminal, the HTTP API) and waits; with --approve it approves it
     itself, through the approvals API as the login token's reviewer
     ("admin"), and prints no instructions;
  3. the audit trail of everything that happened is printed and verified.

Everything lives in a temporary data directory, removed at the end unless
--keep or --data is given.`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usageError{fmt.Errorf("--timeout %v: want a positive duration", timeout)}
			}
			if _, _, err := net.SplitHostPort(listen); err != nil {
				return usageError{fmt.Errorf("--listen %q: want HOST:PORT (port 0: any free port): %v", listen, err)}
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), dataDir, listen, approve, keep, timeout)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data", "", "the data directory (default: a temporary one)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "the gateway's address (port 0: any free port)")
	cmd.Flags().BoolVar(&approve, "approve", false, "approve the high-risk request automatically, as the login token's reviewer (admin)")
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary data directory")
	cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Minute, "how long to wait for your decision")
	return cmd
}

func runDemo(ctx context.Context, out io.Writer, dataDir, listen string, approve, keep bool, timeout time.Duration) error {
	kept := true
	if dataDir == "" {
		d, err := os.MkdirTemp("", "custos-demo-")
		if err != nil {
			return err
		}
		dataDir = d
		if !keep {
			kept = false
			defer os.RemoveAll(d)
		}
	}
	// The agent's key, trusted by the gateway through a JWKS file.
	signer, kid, jwksPath, err := localAgent(dataDir, demoAgent)
	if err != nil {
		return err
	}
	// The second agent: the payments service behind the gateway, which
	// must not be called before a human approves.
	var transfers atomic.Int64
	payments := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := transfers.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"transfer_id":"trf-%04d","status":"executed"}`, n)
	})}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = payments.Serve(pln) }()
	defer payments.Close()
	cfg := config.Default()
	cfg.Listen, cfg.Data, cfg.Agent = listen, dataDir, demoGateway
	cfg.Trust.JWKSFiles = []string{jwksPath}
	cfg.Senders = []config.Sender{{Agent: demoAgent, Capabilities: []string{"demo.*", "payments.*"}}}
	cfg.Handlers = map[string]config.Handler{"demo.echo": {Type: "echo"},
		"payments.transfer": {Type: "http", URL: "http://" + pln.Addr().String() + "/transfers"}}
	if err := cfg.Check(); err != nil {
		return err
	}

	base, token, stop, err := startLocalGateway(ctx, cfg)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	fmt.Fprintf(out, "Custos demo: a gateway (%s) at %s, data in %s\n\n", demoGateway, base, dataDir)

	send := func(capability, profile string, args any) (int, map[string]any, string, error) {
		e, err := arsia.NewRequest(demoAgent, demoGateway, []string{capability}, "com.demo/call", args,
			arsia.BuildOptions{Now: time.Now(), Compliance: map[string]any{"profile": profile}})
		if err != nil {
			return 0, nil, "", err
		}
		env, err := e.Map()
		if err != nil {
			return 0, nil, "", err
		}
		signed, err := sig.Sign(env, signer, kid)
		if err != nil {
			return 0, nil, "", err
		}
		body, _ := json.Marshal(signed)
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/arsia/inbox", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/arsia+json; v=1")
		code, reply, hdr, err := demoDo(req)
		return code, reply, hdr.Get("Custos-Exchange"), err
	}

	fmt.Fprintln(out, "1. The agent asks for demo.echo under GDPR-STANDARD (no human oversight required).")
	code, reply, _, err := send("demo.echo", "GDPR-STANDARD", map[string]any{"text": "hello"})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   -> %d %s, signed by %s\n\n", code, reply["intent"], reply["from"])

	fmt.Fprintln(out, "2. The agent asks for payments.transfer of 250.00 EUR under EU-AI-ACT-HIGH-RISK.")
	code, reply, exID, err := send("payments.transfer", "EU-AI-ACT-HIGH-RISK", map[string]any{"amount": "250.00", "currency": "EUR", "to": "ACME Ltd"})
	if err != nil {
		return err
	}
	if code != 202 {
		return fmt.Errorf("the high-risk request was answered %d: %v", code, reply)
	}
	approvalID := gateway.ApprovalOf(exID)
	fmt.Fprintf(out, "   -> %d %s: the profile requires a human before execution; the payments agent has been called %d times.\n",
		code, reply["intent"], transfers.Load())
	self, installed := selfCommand()
	if approve {
		if err := demoApprove(ctx, base, token, approvalID); err != nil {
			return err
		}
		fmt.Fprintf(out, "   --approve: approved %s through the approvals API, signed in with the login token (reviewer %s)\n",
			approvalID, config.AdminReviewer)
	} else {
		fmt.Fprintf(out, "   Approve or deny it in the web inbox: open %s/ in a browser and sign in with the login token %s\n", base, token)
		fmt.Fprintf(out, "   or from another terminal:\n")
		fmt.Fprintf(out, "     %s approvals --data %s show %s\n", self, dataDir, approvalID)
		fmt.Fprintf(out, "     %s approvals --data %s approve %s   (or: deny)\n", self, dataDir, approvalID)
		if !installed {
			fmt.Fprintf(out, "     (go install ./cmd/custos puts custos on your PATH)\n")
		}
		fmt.Fprintf(out, "   or through the HTTP API: curl -H 'Authorization: Bearer %s' %s/approvals/snapshot\n", token, base)
		fmt.Fprintf(out, "   Waiting for your decision (up to %s)...\n", timeout)
	}
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/arsia/exchanges/"+exID, nil)
		code, reply, _, err = demoDo(req)
		if err != nil {
			return err
		}
		if code != 202 {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("no decision arrived in time")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Fprintf(out, "   -> %d %s; the payments agent has been called %d time(s)\n", code, reply["intent"], transfers.Load())
	if code == 200 {
		if p, ok := reply["payload"].(map[string]any); ok {
			res, _ := json.Marshal(p["result"])
			fmt.Fprintf(out, "      result: %s\n", res)
		}
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/arsia/exchanges/"+exID+"/decision", nil)
	if c, d, _, err := demoDo(req); err == nil && c == 200 {
		if p, ok := d["payload"].(map[string]any); ok {
			res, _ := p["result"].(map[string]any)
			fmt.Fprintf(out, "      approval_decision: %v by %v\n", res["decision"], res["approver_id"])
		}
	}
	fmt.Fprintln(out)

	stopped = true
	if err := stop(); err != nil {
		return err
	}
	fmt.Fprintln(out, "3. The audit trail, hash-chained (ASC: each step's Agent Status Code; "+self+" status explain CODE says what it means):")
	if err := printAuditTrail(context.Background(), out, filepath.Join(dataDir, "custos.db")); err != nil {
		return err
	}
	if kept {
		fmt.Fprintf(out, "\nThe data directory %s is kept: %s audit verify --data %s checks the chain again.\n", dataDir, self, dataDir)
	} else {
		fmt.Fprintf(out, "\nThe temporary data directory is removed now (--keep keeps it).\n")
	}
	return nil
}

func demoDo(req *http.Request) (int, map[string]any, http.Header, error) {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, nil, nil, err
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m, resp.Header, nil
}

// demoApprove approves the request through the approvals HTTP API.
func demoApprove(ctx context.Context, base, token, id string) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/approvals/snapshot", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	snap, err := aais.Parse(b)
	if err != nil {
		return err
	}
	for i := range snap.Snapshot.Pending {
		r := &snap.Snapshot.Pending[i]
		if r.ID != id {
			continue
		}
		d, err := aais.NewDecision(r, aais.DecisionParams{Decision: aais.Approve, Scope: aais.ScopeOnce,
			Actor: aais.Actor{ID: "demo", Type: aais.ActorHuman}, DecidedAt: time.Now()})
		if err != nil {
			return err
		}
		msg, err := aais.NewMessage(aais.Header{OccurredAt: time.Now()}, d)
		if err != nil {
			return err
		}
		body, err := aais.Marshal(msg)
		if err != nil {
			return err
		}
		post, _ := http.NewRequestWithContext(ctx, "POST", base+"/approvals/"+id+"/decisions", bytes.NewReader(body))
		post.Header.Set("Authorization", "Bearer "+token)
		post.Header.Set("Content-Type", "application/json")
		code, _, _, err := demoDo(post)
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("approving %s: HTTP %d", id, code)
		}
		return nil
	}
	return fmt.Errorf("approval %s is not pending", id)
}

// printAuditTrail prints the audit log as a table and verifies it.
func printAuditTrail(ctx context.Context, out io.Writer, path string) error {
	b, err := store.OpenAudit(ctx, store.Location{Kind: store.KindSQLite, Path: path})
	if err != nil {
		return err
	}
	log := audit.New(b, nil)
	defer log.Close()
	var buf bytes.Buffer
	if _, err := log.Export(ctx, &buf, 0, 0); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "   SEQ\tKIND\tCAPABILITY\tPROFILE\tOVERSIGHT\tOUTCOME\tACTOR\tASC")
	var seen []int
	var codes []string // the codes of the ASC column, with their names
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		r, err := audit.ParseRecord(sc.Bytes())
		if err != nil {
			return err
		}
		if e, ok := asc.Lookup(asc.Code(r.ASCCode)); ok && !slices.Contains(seen, r.ASCCode) {
			seen = append(seen, r.ASCCode)
			codes = append(codes, fmt.Sprintf("%d %s", r.ASCCode, e.Name))
		}
		fmt.Fprintf(tw, "   %d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", r.Seq, r.Kind, r.Capability, orDash(r.Profile), orDash(r.Oversight), r.Outcome,
			orDash(r.Actor.ID), r.ASCCode)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(codes) > 0 {
		fmt.Fprintf(out, "   ASC codes: %s\n", strings.Join(codes, ", "))
	}
	rep, err := log.Verify(ctx)
	if err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("the audit trail does not verify: %v", rep.Err())
	}
	fmt.Fprintf(out, "   chain verified: %d records, head %s\n", rep.Records, rep.Head)
	return nil
}
