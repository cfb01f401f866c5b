# One image with every toolfleet binary: executor, picker, planner and the all-in-one
# toolfleet. Static (CGO_ENABLED=0) on distroless, running as the nonroot user (65532).
#   docker build -t toolfleet:dev .
#   docker run --rm toolfleet:dev                         # all-in-one
#   docker run --rm --entrypoint /usr/local/bin/executor toolfleet:dev
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ \
      ./cmd/executor ./cmd/picker ./cmd/planner ./cmd/toolfleet

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/toolfleet"]
