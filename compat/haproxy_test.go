package compat

import "testing"

func TestHAProxyVectors(t *testing.T) { checkVectors(t, "haproxy", "cfg") }

func TestHAProxyRefused(t *testing.T) { checkRefused(t, "haproxy", "cfg") }
