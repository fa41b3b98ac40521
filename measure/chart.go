package measure

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// FindPlotter returns the directory of the examples/plot module, which draws charts with a
// plotting library that the shard module does not depend on: dir if given (it must hold a
// go.mod), else examples/plot under the working directory or its nearest parent that has one.
func FindPlotter(dir string) (string, error) {
	if dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
			return "", fmt.Errorf("plotter %s: not a Go module: %w", dir, err)
		}
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "examples", "plot")
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no examples/plot module under %s or its parents: run from the repository or name its directory", wd)
		}
	}
}

// DrawChart runs the examples/plot module in dir (go run .) with data as JSON on its standard
// input, and it writes the chart to out, an .svg or .png file. The module's own output goes
// to standard error.
func DrawChart(dir string, data any, out string) error {
	in, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	cmd := exec.Command("go", "run", ".", "-o", out)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("drawing the chart with go run in %s: %w", dir, err)
	}
	return nil
}
