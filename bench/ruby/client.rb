# The enqueueing side of Ruby Sidekiq, the twin of bench/client.py:
#
#   REDIS_URL=... ruby bench/ruby/client.rb enqueue WORKLOAD N [--bulk]
#   REDIS_URL=... ruby bench/ruby/client.rb latency N [--interval SECONDS]
#
# Prints one JSON line. One by one is Sidekiq::Client.push, bulk is Sidekiq::Client.push_bulk.
require "json"
require_relative "jobs"

CLASSES = { "noop" => NoopJob, "cpu" => CpuJob, "io" => IoJob }.freeze

command, *rest = ARGV
case command
when "enqueue"
  klass = CLASSES.fetch(rest[0])
  n = Integer(rest[1])
  args = (0...n).map { |i| [i] }
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  if rest.include?("--bulk")
    Sidekiq::Client.push_bulk("class" => klass, "args" => args)
  else
    args.each { |a| Sidekiq::Client.push("class" => klass, "args" => a) }
  end
  puts JSON.generate(seconds: Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
when "latency"
  n = Integer(rest[0])
  i = rest.index("--interval")
  interval = i ? Float(rest[i + 1]) : 0.02
  n.times do
    Sidekiq::Client.push("class" => LatJob, "args" => [Time.now.to_f])
    sleep interval
  end
  puts JSON.generate({})
else
  abort "usage: client.rb enqueue WORKLOAD N [--bulk] | latency N [--interval SECONDS]"
end
