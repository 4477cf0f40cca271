package main

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"net/smtp"
	"text/template"
	"time"
)

//go:embed templates/*.tmpl
var templateFS embed.FS

var templates = template.Must(template.ParseFS(templateFS, "templates/*.tmpl"))

type Mailer struct {
	addr string
	from string
}

func NewMailer(cfg Config) *Mailer {
	return &Mailer{addr: fmt.Sprintf("%s:%d", cfg.SMTPHost, cfg.SMTPPort), from: cfg.FromAddress}
}

func (m *Mailer) Send(to, subject, body string) error {
	msg := fmt.Sprintf("From: %s\r\nTo: %s\r\nSubject: %s\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\n%s",
		m.from, to, subject, body)
	return smtp.SendMail(m.addr, nil, m.from, []string{to}, []byte(msg))
}

// renderTemplate picks templates/<kind>.tmpl; the message's "kind" field comes from the Python side,
// e.g. verify_email, payment_failed, final_notice.
func renderTemplate(kind string, values map[string]interface{}) (string, error) {
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, kind+".tmpl", values); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// sendWithRetry tries up to attempts times with exponential backoff starting at 2s.
func sendWithRetry(ctx context.Context, m *Mailer, values map[string]interface{}, attempts int) error {
	kind, _ := values["kind"].(string)
	to, _ := values["to"].(string)
	body, err := renderTemplate(kind, values)
	if err != nil {
		return err // a missing template will not fix itself: no retry
	}
	delay := 2 * time.Second
	for i := 0; i < attempts; i++ {
		if err = m.Send(to, fmt.Sprintf("[Quillpay] %s", kind), body); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
			delay *= 2
		}
	}
	return fmt.Errorf("send %s to %s: %w", kind, to, err)
}
