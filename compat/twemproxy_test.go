package compat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTwemproxyVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "twemproxy", "twemproxy", "yml", nil)
	require.Equal(t, 64, files)
	require.Equal(t, 128000, placements)
	require.Equal(t, placements, presetOf(t, "twemproxy").Checked, "the preset's Checked")
}

func TestTwemproxyRefused(t *testing.T) {
	require.Equal(t, 23, checkRefusedIn(t, "twemproxy", "twemproxy", "yml"))
}

// The YAML nutcracker reads: odd files (comments, quoting, compact and indented lists,
// continued values, CRLF, a byte order mark, two pools, and many it refuses) with
// nutcracker's own verdict (testdata/compat/twemproxy/yaml/verdicts.txt). The preset must
// agree on every file but two, where it refuses on purpose: distribution random (no
// placement) and a quoted value continued on another line (not supported).
func TestTwemproxyYAMLVerdicts(t *testing.T) {
	dir := filepath.Join(vectorDir, "twemproxy", "yaml")
	ourRefusals := map[string]bool{"random.yml": true, "multiline-quoted.yml": true}
	n := 0
	readLines(t, filepath.Join(dir, "verdicts.txt"), func(line string) {
		if strings.HasPrefix(line, "#") {
			return
		}
		file, verdict, _ := strings.Cut(line, " ")
		config, err := os.ReadFile(filepath.Join(dir, file))
		require.NoError(t, err)
		cfgs, err := ParseTwemproxy(config)
		if err == nil {
			for _, c := range cfgs {
				if _, err = NewTwemproxy(c); err != nil {
					break
				}
			}
		}
		switch {
		case ourRefusals[file]:
			require.Errorf(t, err, "%s", file)
		case verdict == "valid":
			require.NoErrorf(t, err, "%s: nutcracker accepts it", file)
		default:
			require.ErrorIsf(t, err, ErrConfig, "%s: nutcracker refuses it", file)
		}
		t.Logf("%s: nutcracker: %s; preset: %v", file, verdict, err)
		n++
	})
	require.Equal(t, 59, n)
}
