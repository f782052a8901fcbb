package conformance

import "testing"

func TestArsiaAuthorization(t *testing.T) { checkArsiaCategory(t, "authorization", execAuthorization) }
