package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/delegateos/delegateos/serve/ldpfront"
)

var ldpApproveCmd = &command{
	name:    "approve",
	args:    "--key FILE [--decline] [--timeout D] [--json] URL APPROVAL_ID",
	summary: "approve (or --decline) an LDP task a delegate holds for approval, as one of its approvers (ldp.approvers); the task's initiator cannot",
	flags: func(fs *pflag.FlagSet) func(*env, []string) error {
		key := fs.String("key", "", "the approver's key file: one of the delegate's ldp.approvers, which signs the answer")
		decline := fs.Bool("decline", false, "decline the task instead of approving it")
		timeout := fs.Duration("timeout", 30*time.Second, "how long the request may take")
		asJSON := fs.Bool("json", false, "print the delegate's answer as JSON")
		return func(e *env, args []string) error {
			if len(args) != 2 {
				return usagef("give the delegate's URL and the approval ID (from its log, or the task's TASK_UPDATE)")
			}
			if !strings.HasPrefix(args[1], ldpfront.ApprovalIDPrefix) {
				return usagef("%q is not an approval ID (%s…)", args[1], ldpfront.ApprovalIDPrefix)
			}
			u, err := url.Parse(args[0])
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
				return usagef("%q is not an http or https URL", args[0])
			}
			if *timeout <= 0 {
				return usagef("--timeout must be positive")
			}
			k, err := loadKey(*key)
			if err != nil {
				return err
			}
			a := &ldpfront.Approval{ApprovalID: args[1], Approve: !*decline}
			if err := a.Sign(k.PrivateKey(), time.Now()); err != nil {
				return inputError{err}
			}
			body, _ := json.Marshal(a)
			u.Path = strings.TrimSuffix(u.Path, "/") + ldpfront.ApprovalsPath
			ctx, cancel := context.WithTimeout(context.Background(), *timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
			if err != nil {
				return inputError{err}
			}
			req.Header.Set("Content-Type", "application/json")
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := client.Do(req)
			if err != nil {
				return checkError{fmt.Sprintf("POST %s: %v", u, err)}
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			var answer struct {
				Error    string `json:"error"`
				Approved bool   `json:"approved"`
			}
			json.Unmarshal(b, &answer)
			if resp.StatusCode != http.StatusOK {
				msg := answer.Error
				if msg == "" {
					msg = strings.TrimSpace(string(b))
				}
				return checkError{fmt.Sprintf("the delegate refused the answer (%s): %s", resp.Status, oneLine(msg))}
			}
			if *asJSON {
				_, err := e.stdout.Write(append(bytes.TrimSpace(b), '\n'))
				return err
			}
			verb := "approved"
			if !answer.Approved {
				verb = "declined"
			}
			fmt.Fprintf(e.stdout, "%s %s as %s\n", verb, args[1], a.Approver)
			return nil
		}
	},
}
