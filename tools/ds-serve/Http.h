//===- Http.h - the HTTP/1.1 that ds-serve speaks ------------------------------===//
//
// A listening socket, one thread per connection, requests read whole (Content-Length
// bodies), responses written whole or streamed (server-sent events), each connection closed
// after its response. Enough for OpenAI's clients (httpx, curl); no TLS (put a proxy in front).
//
#ifndef DS_SERVE_HTTP_H
#define DS_SERVE_HTTP_H

#include <functional>
#include <map>
#include <string>

namespace dsserve {

struct HttpRequest {
  std::string method, path;
  std::map<std::string, std::string> headers; ///< names in lower case
  std::string body;
};

/// A connection's response side.
class HttpResponse {
public:
  explicit HttpResponse(int fd) : fd_(fd) {}
  /// A whole response with `body` of `contentType`.
  bool send(int status, const std::string &contentType, const std::string &body);
  /// Starts a server-sent event stream (status 200, text/event-stream).
  bool startEvents();
  /// One event: "data: PAYLOAD\n\n". False when the client has gone.
  bool event(const std::string &payload);
  bool started() const { return started_; }

private:
  bool write(const std::string &bytes);
  int fd_;
  bool started_ = false;
};

using HttpHandler = std::function<void(const HttpRequest &, HttpResponse &)>;

/// Listens on `host`:`port` (port 0: any free one). Returns the socket or -1 with `err`.
int listenOn(const std::string &host, int port, std::string &err);
/// The port `fd` is bound to.
int boundPort(int fd);
/// Accepts connections on `fd` until it is shut down, each served on its own thread by
/// `handler`; returns when accept fails. `active` counts the connections being served.
void serveConnections(int fd, const HttpHandler &handler);
/// Waits until every connection thread has finished (after serveConnections returned).
void waitForConnections();

} // namespace dsserve

#endif
