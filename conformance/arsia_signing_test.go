package conformance

import "testing"

func TestArsiaSigning(t *testing.T) { checkArsiaCategory(t, "signing", execSigning) }

func TestArsiaEncryption(t *testing.T) { checkArsiaCategory(t, "encryption", execEncryption) }
