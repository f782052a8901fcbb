package audit_test

import (
	"context"
	"testing"

	"github.com/custos-runtime/custos/audit"
	"github.com/custos-runtime/custos/audit/audittest"
)

// A gateway stopped between recording an approval and acting on it records
// it again when it resumes: the verifier counts that as a repeat, and two
// different resolutions of one approval request as a problem.
func TestVerifyApprovalRecords(t *testing.T) {
	ctx := context.Background()
	approval := func(req, res string) audit.Record {
		r := audittest.Sample(audit.KindApproval, 1)
		r.RequestID, r.ResolutionID, r.Outcome = req, res, "approved"
		return r
	}
	tests := []struct {
		name     string
		records  []audit.Record
		repeated int
		problem  audit.ProblemKind
	}{
		{"distinct", []audit.Record{approval("apr_1", "res_1"), approval("apr_2", "res_2")}, 0, ""},
		{"repeated after a restart", []audit.Record{approval("apr_1", "res_1"), audittest.Sample(audit.KindExecution, 2),
			approval("apr_1", "res_1"), approval("apr_1", "res_1")}, 2, ""},
		{"conflicting", []audit.Record{approval("apr_1", "res_1"), approval("apr_1", "res_forged")}, 0, audit.ProblemConflictingApproval},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := audit.New(audit.NewMemory(), nil)
			for _, r := range tc.records {
				if _, err := l.Append(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := l.Verify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rep.RepeatedApprovals != tc.repeated {
				t.Errorf("RepeatedApprovals = %d, want %d", rep.RepeatedApprovals, tc.repeated)
			}
			switch {
			case tc.problem == "" && rep.Problem != nil:
				t.Errorf("problem %+v", rep.Problem)
			case tc.problem != "" && (rep.Problem == nil || rep.Problem.Kind != tc.problem):
				t.Errorf("problem %+v, want %s", rep.Problem, tc.problem)
			}
		})
	}
}
