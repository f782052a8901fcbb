package conformance

import "testing"

func TestArsiaCertificates(t *testing.T) { checkArsiaCategory(t, "certificates", execCertificates) }

func TestArsiaDiscovery(t *testing.T) { checkArsiaCategory(t, "discovery", execDiscovery) }
