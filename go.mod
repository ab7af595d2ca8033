module github.com/mirror-gateway/mirror

go 1.26.8

require (
	github.com/chromedp/chromedp v0.23.1
	github.com/gorilla/websocket v1.5.3
	github.com/pkoukk/tiktoken-go v0.1.8
	github.com/pkoukk/tiktoken-go-loader v0.0.2
	github.com/robfig/cron/v3 v3.0.1
	go.etcd.io/bbolt v1.5.0
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/sys v0.45.0
)

require (
	github.com/chromedp/cdproto v0.160.1 // indirect
	github.com/dlclark/regexp2 v1.10.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/google/uuid v1.3.0 // indirect
)
