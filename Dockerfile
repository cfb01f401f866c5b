# One image with every toolfleet binary: executor, picker, planner, the all-in-one
# toolfleet, and toolfleet-sandbox, the launcher the executor and toolfleet start
# sandboxed command tools through (beside them: no setting needed). Static
# (CGO_ENABLED=0) on distroless, running as the nonroot user (65532).
#   docker build -t toolfleet:dev .
#   docker build --build-arg VERSION="$(git describe --tags --always --dirty)" -t toolfleet:v0.1.0 .
#   docker run --rm -p 127.0.0.1:8080:8080 -p 127.0.0.1:4222:4222 toolfleet:dev   # all-in-one: toolfleet dev
#   docker run --rm --entrypoint /usr/local/bin/executor toolfleet:dev          # one part
# --entrypoint (compose: entrypoint:, Kubernetes: command:) picks a part; it also drops
# the CMD below, which only the all-in-one reads.
#
# Base images are pinned to exact versions. To pin digests as well, look them up with
#   docker buildx imagetools inspect golang:1.26.8
#   docker buildx imagetools inspect gcr.io/distroless/static-debian12:nonroot
# and write FROM <image>:<tag>@sha256:<digest>. distroless publishes no version tags,
# so its digest is the only exact pin.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# What `<program> version` says: .git is not in the build context (.dockerignore), so
# there is nothing for go build to stamp the tag and commit from; the linker takes
# VERSION instead (a tag, or git describe's tag-commits-hash[-dirty]). Without it:
# (devel).
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags="-s -w -X github.com/toolfleet/toolfleet/internal/ops.version=${VERSION}" -o /out/ \
      ./cmd/executor ./cmd/picker ./cmd/planner ./cmd/toolfleet ./cmd/toolfleet-sandbox
# The licence and notice files of every module linked into the binaries, which their
# licences ask a copy to carry: /usr/share/doc/toolfleet/third_party/<module>/.
RUN go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Dir}}{{end}}{{end}}' \
      ./cmd/executor ./cmd/picker ./cmd/planner ./cmd/toolfleet ./cmd/toolfleet-sandbox | sort -u | \
    while read -r path dir; do \
      mkdir -p "/out/third_party/$path" && \
      find "$dir" -maxdepth 1 -type f \( -iname 'LICEN[CS]E*' -o -iname 'COPYING*' -o -iname 'NOTICE*' \) \
        -exec cp {} "/out/third_party/$path/" \; ; \
    done

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/executor /out/picker /out/planner /out/toolfleet /out/toolfleet-sandbox /usr/local/bin/
COPY --from=build /out/third_party/ /usr/share/doc/toolfleet/third_party/
COPY LICENSE NOTICE /usr/share/doc/toolfleet/
USER 65532:65532
# 8080 the planner API (all-in-one and planner), 4222 the all-in-one's NATS, 9090 the ops
# port of every binary (/metrics, /healthz, /readyz).
EXPOSE 8080 4222 9090
# Any part: toolfleet health asks 127.0.0.1:<ops port>/readyz (TOOLFLEET_OPS_ADDR,
# :9090 by default) and exits 0 or 1, so the one check serves every binary of the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=15s --retries=3 \
  CMD ["/usr/local/bin/toolfleet", "health"]
ENTRYPOINT ["/usr/local/bin/toolfleet"]
CMD ["dev", "-host", "0.0.0.0"]
