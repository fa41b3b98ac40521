package compat

import (
	"testing"
)

func TestNginxVectors(t *testing.T) { checkVectors(t, "nginx", "conf") }

func TestNginxRefused(t *testing.T) { checkRefused(t, "nginx", "conf") }
