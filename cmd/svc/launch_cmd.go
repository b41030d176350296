package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/svchost/svc/api"
)

// launchFlags are svc launch's own flags.
type launchFlags struct {
	name, app       string
	repo            api.NewRepository
	answers, values []string
	secrets         []string
	wait            time.Duration
}

// newLaunchCmd is `svc launch [DIR]`: from a directory to a running app in
// one command.
func newLaunchCmd() *cobra.Command {
	var f clientFlags
	var l launchFlags
	cmd := &cobra.Command{
		Use:   "launch [DIR | --repo URL]",
		Short: "Create an app from a directory or a repository and run it",
		Long: "Create an app from a directory (default .) and run it: create it (POST /api/v1/apps), upload DIR as a tar.gz (POST …/source), wait for detection (GET …/detection), show its proposal and questions, accept it (POST …/detection/accept), deploy with the log followed, and print the URL.\n\n" +
			"Launch the app in DIR (default: the current directory).\n\n" +
			"The archive leaves out .git, links that lead outside DIR, and anything that is not a file, directory or link; what it leaves out is listed on stderr.\n" +
			"When detection asks questions it cannot answer from --answer, --set and --secret, launch prints them with how to answer and exits 1; the app stays, and\n" +
			"svc launch DIR --app SLUG --answer KEY=VALUE continues with it. --secret KEY takes the value from the environment variable KEY, so that it stays out of the command line.\n" +
			"With --repo URL (and --ref, --subdir) the app is created from a git repository instead, which the server clones and detects;\n" +
			"svc launch --repo URL --app SLUG --answer KEY=VALUE continues with an app launched from it.\n" +
			"With --output json the API's answers are printed unchanged, one a line.",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			switch {
			case l.repo.Repository == "" && (l.repo.Ref != "" || l.repo.Subdir != ""):
				return usageError("--ref and --subdir go with --repo")
			case l.repo.Repository != "" && len(args) == 1:
				return usageError("give a directory or --repo, not both")
			}
			return launch(cmd, &f, l, dir)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&l.name, "name", "", "the app's name (default: the directory's name)")
	fl.StringVar(&l.repo.Repository, "repo", "", "create the app from this git repository (its URL) instead of a directory")
	fl.StringVar(&l.repo.Ref, "ref", "", "the branch, tag or commit of --repo (default: its default branch)")
	fl.StringVar(&l.repo.Subdir, "subdir", "", "the app's directory in --repo")
	fl.StringVar(&l.app, "app", "", "launch into this existing app (ID or slug) instead of creating one: the new proposal replaces its configuration")
	fl.StringArrayVar(&l.answers, "answer", nil, "KEY=VALUE: answer one of detection's questions (repeatable)")
	fl.StringArrayVar(&l.values, "set", nil, "KEY=VALUE: an environment variable to set at accept (repeatable)")
	fl.StringArrayVar(&l.secrets, "secret", nil, "KEY: a secret to set at accept, its value read from the environment variable KEY (repeatable)")
	fl.DurationVar(&l.wait, "detect-timeout", 2*time.Minute, "how long to wait for detection")
	_ = cmd.RegisterFlagCompletionFunc("app", func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completeApps(&f)(cmd, nil, toComplete)
	})
	return cmd
}

func launch(cmd *cobra.Command, f *clientFlags, l launchFlags, dir string) error {
	answers, values, err := l.parse()
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	name := l.repo.Repository
	if name == "" {
		abs, err := filepath.Abs(dir)
		if err != nil {
			return usageError("%s: %v", dir, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return usageError("%s is not a directory", dir)
		}
		left, err := tarDir(abs, &archive)
		if err != nil {
			return &exitError{code: 1, err: err}
		}
		for _, s := range left {
			fmt.Fprintf(cmd.ErrOrStderr(), "left out %s: %s\n", s.path, s.why)
		}
		name = filepath.Base(abs)
	} else {
		dir = l.repo.Repository
		name = strings.TrimSuffix(filepath.Base(strings.TrimRight(cmpOr(l.repo.Subdir, l.repo.Repository), "/")), ".git")
	}
	c, err := f.client()
	if err != nil {
		return err
	}
	ctx, p, stderr := cmd.Context(), f.printer(cmd), cmd.ErrOrStderr()
	var a api.App
	if l.app != "" {
		if _, a, _, err = f.app(cmd, l.app); err != nil {
			return err
		}
		if r := l.repo.Repository; r != "" && (a.Source == nil || a.Source.Repository != r) {
			return usageError("app %s is not made from %s: --repo with --app continues an app launched from that repository; "+
				"to change an app's repository: svc apps update %s --source '{\"repository\":\"%s\"}'", a.Slug, r, a.Slug, r)
		}
	} else {
		n := api.NewApp{Name: cmpOr(l.name, name)}
		if l.repo.Repository != "" {
			n.Source = &l.repo
		}
		ans, raw, err := c.CreateApp(ctx, n)
		if err != nil {
			return refusal(stderr, err)
		}
		a = ans.App
		if err := p.rawOr(raw, "Created app %s (%s)", a.Slug, a.ID); err != nil {
			return err
		}
	}
	pr := newProgress(cmd, p)
	defer pr.done()
	// Detection of the upload's commit, or of the repository's first
	// clone (whose commit the server finds).
	detected := func(d api.Detection) bool { return d.Commit != "" }
	if l.repo.Repository == "" {
		size := archive.Len()
		pr.step(fmt.Sprintf("Uploading %s: 0 B of %s", dir, byteSize(int64(size))))
		body := &countingReader{r: &archive, fn: func(n int64) {
			pr.update(fmt.Sprintf("Uploading %s: %s of %s", dir, byteSize(n), byteSize(int64(size))))
		}}
		src, raw, err := c.UploadSource(ctx, a.ID, "application/gzip", body)
		pr.done()
		if err != nil {
			return refusal(stderr, err)
		}
		if err := p.rawOr(raw, "Uploaded %s (%.1f KiB), %s", dir, float64(size)/1024, src.Source.Commit); err != nil {
			return err
		}
		detected = func(d api.Detection) bool { return d.Commit == src.Source.Commit }
	}
	pr.step("Waiting for detection")
	det, raw, err := waitDetection(ctx, c, a.ID, detected, l.wait)
	if err == nil && len(answers) > 0 {
		if _, _, err = c.AnswerDetection(ctx, a.ID, answers); err == nil {
			pr.step("Waiting for detection with the answers")
			det, raw, err = waitDetection(ctx, c, a.ID, detected, l.wait)
		}
	}
	pr.done()
	if err != nil {
		return refusal(stderr, err)
	}
	if p.json {
		if err := p.raw(raw); err != nil {
			return err
		}
	}
	if det.Status != "done" || det.Winner == nil {
		return &exitError{code: 1, err: fmt.Errorf("detection of %s %s: %s", dir, det.Status, cmpOr(det.Error, "no detector recognised it"))}
	}
	if err := printProposal(p, det); err != nil {
		return err
	}
	if open := openQuestions(det, values); len(open) > 0 {
		for _, q := range open {
			how := "--answer " + q.Key + "=VALUE"
			if q.Kind == "secret" {
				how = "--secret " + q.Key + " (with " + q.Key + " in the environment)"
			}
			fmt.Fprintf(stderr, "question %s (%s): %s\n  answer with %s\n", q.Key, q.Kind, q.Prompt, how)
		}
		again := "svc launch " + dir
		if l.repo.Repository != "" {
			again = "svc launch --repo " + dir
		}
		return &exitError{code: 1, err: fmt.Errorf("detection asks %d question(s); run %s --app %s with the answers", len(open), again, a.Slug)}
	}
	sp, raw, err := c.AcceptDetection(ctx, a.ID, values, l.app != "")
	if err != nil {
		return refusal(stderr, err)
	}
	if err := p.rawOr(raw, "Accepted the proposal as revision %d", sp.Spec.Revision); err != nil {
		return err
	}
	if err := deploy(cmd, p, c, a, 0, true); err != nil {
		return err
	}
	got, _, err := c.App(ctx, a.ID)
	if err != nil {
		return refusal(stderr, err)
	}
	if got.App.URL == nil {
		return p.line("%s is running; it has no URL yet (svc status %s)", a.Slug, a.Slug)
	}
	return p.line("%s is running at %s", a.Slug, *got.App.URL)
}

// parse reads --answer, --set and --secret: the answers for detection and
// the values for accept. A malformed one, or a secret missing from the
// environment, is a usage error.
func (l launchFlags) parse() (map[string]string, []api.Value, error) {
	answers := map[string]string{}
	for _, s := range l.answers {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, nil, usageError("--answer %q: want KEY=VALUE", s)
		}
		answers[k] = v
	}
	var values []api.Value
	for _, s := range l.values {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, nil, usageError("--set %q: want KEY=VALUE", s)
		}
		values = append(values, api.Value{Key: k, Value: v})
	}
	for _, k := range l.secrets {
		v, ok := os.LookupEnv(k)
		if k == "" || strings.Contains(k, "=") || !ok {
			return nil, nil, usageError("--secret %q: want the name of an environment variable that holds the value", k)
		}
		values = append(values, api.Value{Key: k, Value: v, Secret: true})
	}
	return answers, values, nil
}

// waitDetection waits, until the deadline, for the detection that
// detected says is the one to be done or failed.
func waitDetection(ctx context.Context, c *api.Client, appID string, detected func(api.Detection) bool, wait time.Duration) (api.Detection, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		det, raw, err := c.Detection(ctx, appID)
		if err == nil && detected(det) && (det.Status == "done" || det.Status == "failed") {
			return det, raw, nil
		}
		if err != nil && ctx.Err() == nil {
			return det, raw, err
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return api.Detection{}, nil, fmt.Errorf("detection did not finish in %s (svc launch --detect-timeout)", wait)
			}
			return api.Detection{}, nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// openQuestions are detection's questions that neither an answer nor a
// value at accept settles.
func openQuestions(det api.Detection, values []api.Value) []api.Question {
	var open []api.Question
	for _, q := range det.Questions {
		if _, ok := det.Answers[q.Key]; ok {
			continue
		}
		if slices.ContainsFunc(values, func(v api.Value) bool { return v.Key == q.Key }) {
			continue
		}
		open = append(open, q)
	}
	return open
}

// printProposal prints the winner and each proposed workload.
func printProposal(p printer, det api.Detection) error {
	w := det.Winner
	if err := p.line("Detected %s (score %d); the proposal:", w.Detector, w.Score); err != nil || p.json {
		return err
	}
	names := make([]string, 0, len(w.Proposal.Workloads))
	for n := range w.Proposal.Workloads {
		names = append(names, n)
	}
	slices.Sort(names)
	rows := make([][]string, 0, len(names))
	for _, n := range names {
		wl := w.Proposal.Workloads[n]
		build := ""
		if b := wl.Build; b != nil {
			build = firstOf(b.Command, b.Dockerfile, b.Image)
		}
		port := ""
		if wl.Run.Port > 0 {
			port = fmt.Sprint(wl.Run.Port)
		}
		rows = append(rows, []string{n, build, strings.Join(wl.Run.Command, " "), port})
	}
	return p.table([]string{"WORKLOAD", "BUILD", "RUN", "PORT"}, rows)
}
