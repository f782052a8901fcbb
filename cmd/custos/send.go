package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/custos-runtime/custos/arsia"
	"github.com/custos-runtime/custos/arsia/sig"
	"github.com/custos-runtime/custos/asc"
	"github.com/custos-runtime/custos/client"
)

// exitStatus is an error that chooses the command's exit code.
type exitStatus struct {
	error
	code int
}

func (e exitStatus) ExitCode() int { return e.code }

// ascExit is the exit code of a call that ended with ASC status c: the
// code's first digit for the classes that report a failure or a wait (3
// interrupted, 4 request or policy, 5 transient, 6 fatal or indeterminate,
// 7 quality or verification), otherwise 1.
func ascExit(c asc.Code) int {
	if c >= 3000 && c <= 7999 {
		return int(c / 1000)
	}
	return exitFailure
}

type sendConfig struct {
	key, to, server, capability, payloadType, args, profile string
	jwks, accessToken, idempotencyKey                       string
	wait, insecure, asJSON                                  bool
	timeout                                                 time.Duration
}

func newSendCommand() *cobra.Command {
	cfg := &sendConfig{}
	cmd := &cobra.Command{
		Use:   "send --key K --to URL|AGENT --capability C --type T [--args JSON] [--profile P] [--wait]",
		Short: "Call an agent through a Custos gateway: sign, send, wait, verify",
		Long: `Sign an ARSIA request with the agent key in --key (a private JWK, as custos
keygen writes it; the sender is the agent its kid names), send it to the
receiver, and print the verified result.

--to is the receiver's base URL (a custos serve: its discovery document at
/.well-known/arsia names its agent id, inbox and keys), or its agent id,
in which case --server (or $CUSTOS_SERVER) is the URL and its discovery
document must name that agent. Every reply's signature is verified against
the keys the discovery document publishes (or the JWKS file in --jwks); a
reply that does not verify, that another agent signed or that answers
another request is refused, never printed.

When a compliance profile puts the call before a human, the gateway answers
pending_approval: without --wait it is printed and the command exits 3;
with --wait the status URL is polled (with backoff, honouring Retry-After)
until a reviewer decided and the call ran, for at most --timeout.

The result (payload.result) is printed as JSON; --json prints the whole
verified reply envelope. Exit codes: 0 success; 3-7 the first digit of the
ASC status of a refusal or wait (3 interrupted: waits for approval,
cancelled, an access token needed; 4 the request or a policy refused it:
denied, forbidden, invalid; 5 transient: a retry later may work; 6 fatal
or indeterminate; 7 quality or verification: the gateway could not verify
the request's signature); 1 any other failure (the reply did not verify,
the receiver could not be reached); 2 the command line is wrong.`,
		Example: `  custos send --key keys/key-1.private.jwk.json --to http://127.0.0.1:8080 \
    --capability demo.echo --type com.acme/echo --args '{"text":"hi"}'
  custos send --key k.json --to agent:acme.gateway --server https://gw.example \
    --capability billing.invoice.create --type com.acme/invoice \
    --args '{"amount":"100.00"}' --profile EU-AI-ACT-HIGH-RISK --wait`,
		Args: argsExactly(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			call, err := cfg.call()
			if err != nil {
				return usageError{err}
			}
			if cfg.timeout < 0 {
				return usageError{errors.New("--timeout must not be negative")}
			}
			key, err := client.LoadKey(cfg.key)
			if err != nil {
				return err
			}
			opts := &client.SenderOptions{AllowInsecureHTTP: cfg.insecure, Token: cfg.accessToken}
			if opts.Token == "" {
				opts.Token = os.Getenv("CUSTOS_ACCESS_TOKEN")
			}
			if cfg.jwks != "" {
				data, err := os.ReadFile(cfg.jwks)
				if err != nil {
					return err
				}
				keys, err := sig.ParseStaticJWKS(data)
				if err != nil {
					return fmt.Errorf("%s: %w", cfg.jwks, err)
				}
				opts.Keys = keys
			}
			s, err := client.NewSender(key, opts)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if cfg.wait && cfg.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
				defer cancel()
			}
			return cfg.send(ctx, cmd, s, call)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.key, "key", "", "the sending agent's private JWK file")
	f.StringVar(&cfg.to, "to", "", "the receiver: its base URL, or its agent id (with --server)")
	f.StringVar(&cfg.server, "server", "", "the receiver's URL when --to is an agent id (default $CUSTOS_SERVER)")
	f.StringVar(&cfg.capability, "capability", "", "the capability the call asks for, e.g. billing.invoice.create")
	f.StringVar(&cfg.payloadType, "type", "", "the payload type, e.g. com.acme/invoice.create")
	f.StringVar(&cfg.args, "args", "", "the payload's args: a JSON object (default {})")
	f.StringVar(&cfg.profile, "profile", "", "the compliance profile, e.g. EU-AI-ACT-HIGH-RISK")
	f.BoolVar(&cfg.wait, "wait", false, "wait for a pending approval and the final reply")
	f.DurationVar(&cfg.timeout, "timeout", 15*time.Minute, "with --wait, how long to wait at most (0: no limit)")
	f.StringVar(&cfg.jwks, "jwks", "", "verify replies with this JWKS file instead of the receiver's discovered keys")
	f.StringVar(&cfg.accessToken, "access-token", "", "an access token for the gateway (default $CUSTOS_ACCESS_TOKEN)")
	f.StringVar(&cfg.idempotencyKey, "idempotency-key", "", "sent as the Idempotency-Key header")
	f.BoolVar(&cfg.insecure, "insecure", false, "allow plain http to a host that is not loopback")
	f.BoolVar(&cfg.asJSON, "json", false, "print the whole verified reply envelope")
	return cmd
}

// call checks the command line and returns the call it describes.
func (cfg *sendConfig) call() (client.Call, error) {
	var c client.Call
	switch {
	case cfg.key == "":
		return c, errors.New("send: --key is required")
	case cfg.to == "":
		return c, errors.New("send: --to is required: the receiver's URL or agent id")
	case cfg.capability == "":
		return c, errors.New("send: --capability is required")
	case cfg.payloadType == "":
		return c, errors.New("send: --type is required")
	}
	if err := arsia.ValidateCapability(cfg.capability); err != nil {
		return c, fmt.Errorf("send: --capability %q: %v", cfg.capability, err)
	}
	c.Capabilities, c.Type, c.Profile, c.NoWait, c.IdempotencyKey = []string{cfg.capability}, cfg.payloadType, cfg.profile, !cfg.wait, cfg.idempotencyKey
	if strings.HasPrefix(cfg.to, "http://") || strings.HasPrefix(cfg.to, "https://") {
		c.To = cfg.to
	} else {
		if !arsia.ValidAgentID(cfg.to) {
			return c, fmt.Errorf("send: --to %q is neither an http(s) URL nor an agent id (agent:org.name)", cfg.to)
		}
		c.Agent, c.To = cfg.to, cfg.server
		if c.To == "" {
			c.To = os.Getenv("CUSTOS_SERVER")
		}
		if c.To == "" {
			return c, fmt.Errorf("send: --to %s is an agent id: name its URL with --server or $CUSTOS_SERVER", cfg.to)
		}
	}
	if cfg.args == "" {
		cfg.args = "{}"
	}
	{
		var obj map[string]json.RawMessage
		dec := json.NewDecoder(strings.NewReader(cfg.args))
		if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
			return c, errors.New("send: --args must be one JSON object")
		}
		c.Args = json.RawMessage(cfg.args)
	}
	return c, nil
}

func (cfg *sendConfig) send(ctx context.Context, cmd *cobra.Command, s *client.Sender, c client.Call) error {
	c.OnPending = func(res *client.Result) {
		fmt.Fprintf(cmd.ErrOrStderr(), "custos: waiting for a human: approval %s, exchange %s\n", visible(res.ApprovalID()), visible(res.ExchangeID))
	}
	res, err := s.Send(ctx, c)
	if err != nil {
		if e := client.Status(err); e != nil {
			return exitStatus{fmt.Errorf("send: refused: %s", visible(e.Error())), ascExit(e.Code)}
		}
		if errors.Is(err, client.ErrUnverified) {
			return fmt.Errorf("send: %w", err)
		}
		if errors.Is(err, context.DeadlineExceeded) && cfg.wait {
			return exitStatus{fmt.Errorf("send: no final reply within --timeout %s: %w", cfg.timeout, err), ascExit(asc.Timeout)}
		}
		return fmt.Errorf("send: %w", err)
	}
	out := cmd.OutOrStdout()
	if res.Intent == arsia.IntentPendingApproval {
		fmt.Fprintf(cmd.ErrOrStderr(), "custos: waiting for a human: approval %s, exchange %s; poll %s or run again with --wait\n",
			visible(res.ApprovalID()), visible(res.ExchangeID), visible(res.StatusURL))
		if err := printJSON(out, res.Envelope); err != nil {
			return err
		}
		return exitStatus{errors.New("send: the call waits for approval (ASC 3002 HUMAN_APPROVAL_REQUIRED)"), ascExit(asc.HumanApprovalRequired)}
	}
	if cfg.asJSON {
		return printJSON(out, res.Envelope)
	}
	if res.Result == nil {
		_, err := fmt.Fprintln(out, "null")
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, res.Result, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = out.Write(b.Bytes())
	return err
}

func printJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
