//===- Http.cpp - sockets, requests and responses ------------------------------===//
#include "Http.h"

#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace dsserve {

namespace {
constexpr size_t kMaxHeader = 64 << 10, kMaxBody = 16 << 20;

std::mutex connectionsLock;
std::condition_variable connectionsDone;
int connections = 0;

const char *reason(int status) {
  switch (status) {
  case 200:
    return "OK";
  case 400:
    return "Bad Request";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 413:
    return "Payload Too Large";
  case 500:
    return "Internal Server Error";
  case 503:
    return "Service Unavailable";
  default:
    return "Status";
  }
}

std::string lower(std::string s) {
  for (char &c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Reads one request from `fd`; `status` is the error to answer (0: read, -1: the client
/// went away before sending one).
bool readRequest(int fd, HttpRequest &req, int &status) {
  std::string data;
  char buf[8192];
  size_t headerEnd;
  while ((headerEnd = data.find("\r\n\r\n")) == std::string::npos) {
    if (data.size() > kMaxHeader) {
      status = 413;
      return false;
    }
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      status = -1;
      return false;
    }
    data.append(buf, static_cast<size_t>(n));
  }
  size_t lineEnd = data.find("\r\n");
  std::string line = data.substr(0, lineEnd);
  size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) {
    status = 400;
    return false;
  }
  req.method = line.substr(0, sp1);
  req.path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (size_t q = req.path.find('?'); q != std::string::npos)
    req.path.resize(q);
  for (size_t at = lineEnd + 2; at < headerEnd;) {
    size_t end = data.find("\r\n", at);
    std::string h = data.substr(at, end - at);
    if (size_t colon = h.find(':'); colon != std::string::npos) {
      size_t v = h.find_first_not_of(" \t", colon + 1);
      req.headers[lower(h.substr(0, colon))] = v == std::string::npos ? "" : h.substr(v);
    }
    at = end + 2;
  }
  size_t length = 0;
  if (auto it = req.headers.find("content-length"); it != req.headers.end())
    length = std::strtoull(it->second.c_str(), nullptr, 10);
  if (req.headers.count("transfer-encoding")) {
    status = 400; // clients send JSON with a length
    return false;
  }
  if (length > kMaxBody) {
    status = 413;
    return false;
  }
  req.body = data.substr(headerEnd + 4);
  while (req.body.size() < length) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      status = -1;
      return false;
    }
    req.body.append(buf, static_cast<size_t>(n));
  }
  req.body.resize(length);
  status = 0;
  return true;
}

void serveOne(int fd, const HttpHandler &handler) {
  HttpRequest req;
  int status = 0;
  HttpResponse res(fd);
  if (readRequest(fd, req, status))
    handler(req, res);
  else if (status > 0)
    res.send(status, "application/json",
             std::string("{\"error\": {\"message\": \"") + reason(status) +
                 "\", \"type\": \"invalid_request_error\"}}");
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
}
} // namespace

bool HttpResponse::write(const std::string &bytes) {
  for (size_t at = 0; at < bytes.size();) {
    ssize_t n = ::send(fd_, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

bool HttpResponse::send(int status, const std::string &contentType, const std::string &body) {
  started_ = true;
  return write("HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
               "\r\nContent-Type: " + contentType +
               "\r\nContent-Length: " + std::to_string(body.size()) +
               "\r\nConnection: close\r\n\r\n" + body);
}

bool HttpResponse::startEvents() {
  started_ = true;
  return write("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: "
               "no-cache\r\nConnection: close\r\n\r\n");
}

bool HttpResponse::event(const std::string &payload) { return write("data: " + payload + "\n\n"); }

int listenOn(const std::string &host, int port, std::string &err) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found)) {
    err = "cannot resolve --host '" + host + "': " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo *a = found; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
      continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0)
      break;
    err = "cannot listen on " + host + ":" + service + ": " + std::strerror(errno) +
          " (another --port, or stop what holds it)";
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  return fd;
}

int boundPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  if (addr.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<sockaddr_in6 *>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in *>(&addr)->sin_port);
}

void serveConnections(int fd, const HttpHandler &handler) {
  for (;;) {
    int c = ::accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return; // shut down
    }
    {
      std::lock_guard<std::mutex> lock(connectionsLock);
      ++connections;
    }
    std::thread([c, &handler] {
      serveOne(c, handler);
      std::lock_guard<std::mutex> lock(connectionsLock);
      if (--connections == 0)
        connectionsDone.notify_all();
    }).detach();
  }
}

void waitForConnections() {
  std::unique_lock<std::mutex> lock(connectionsLock);
  connectionsDone.wait(lock, [] { return connections == 0; });
}

} // namespace dsserve
