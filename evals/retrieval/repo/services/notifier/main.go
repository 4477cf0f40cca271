// Command notifier reads the notifications Redis stream and sends transactional email.
// It replaced the Python Celery worker: one static binary, no broker besides Redis.
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/redis/go-redis/v9"
)

type Config struct {
	RedisURL      string
	Stream        string
	ConsumerGroup string
	ConsumerName  string
	SMTPHost      string
	SMTPPort      int
	FromAddress   string
}

func loadConfig() Config {
	port, err := strconv.Atoi(getenv("QP_NOTIFIER__SMTP_PORT", "1025"))
	if err != nil {
		port = 1025
	}
	host, _ := os.Hostname()
	return Config{
		RedisURL:      getenv("QP_REDIS__URL", "redis://localhost:6379/0"),
		Stream:        getenv("QP_NOTIFIER__STREAM", "notifications"),
		ConsumerGroup: getenv("QP_NOTIFIER__CONSUMER_GROUP", "notifier"),
		ConsumerName:  host,
		SMTPHost:      getenv("QP_NOTIFIER__SMTP_HOST", "localhost"),
		SMTPPort:      port,
		FromAddress:   getenv("QP_NOTIFIER__FROM_ADDRESS", "billing@quillpay.dev"),
	}
}

func getenv(key, fallback string) string {
	if value, ok := os.LookupEnv(key); ok {
		return value
	}
	return fallback
}

func run(ctx context.Context, cfg Config, rdb *redis.Client, mailer *Mailer) error {
	// MKSTREAM creates the stream on first boot; BUSYGROUP means the group already exists.
	if err := rdb.XGroupCreateMkStream(ctx, cfg.Stream, cfg.ConsumerGroup, "0").Err(); err != nil && err.Error() != "BUSYGROUP Consumer Group name already exists" {
		return err
	}
	for ctx.Err() == nil {
		streams, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: cfg.ConsumerGroup, Consumer: cfg.ConsumerName,
			Streams: []string{cfg.Stream, ">"}, Count: 10, Block: 0,
		}).Result()
		if err != nil {
			continue
		}
		for _, msg := range streams[0].Messages {
			if err := sendWithRetry(ctx, mailer, msg.Values, 3); err != nil {
				slog.Error("giving up on message", "id", msg.ID, "err", err)
				continue // left pending; XAUTOCLAIM on another consumer picks it up later
			}
			rdb.XAck(ctx, cfg.Stream, cfg.ConsumerGroup, msg.ID)
		}
	}
	return nil
}

func main() {
	cfg := loadConfig()
	opts, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		slog.Error("bad redis url", "err", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, redis.NewClient(opts), NewMailer(cfg)); err != nil {
		slog.Error("notifier stopped", "err", err)
		os.Exit(1)
	}
}
